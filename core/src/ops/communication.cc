// Collectives between ranks, emitted by the model builder under tensor, sequence, expert and
// context parallelism (attr "group": "tp", "ep" or "cp"). A single-device simulation does not
// time them: they launch no kernel here and carry their payload in communication_bytes, so that
// reports can say how much communication a rank's step holds. The collective model of a cluster
// gives them a time.
#include "op_families.h"

namespace accelsim::ops {
namespace {

OpCount count_collective(const Graph& g, const Node& n) {
  OpCount c;
  c.op_class = OpClass::communication;
  c.compute_dtype = result_dtype(g, n);
  c.launches_kernel = false;
  c.communication_bytes = write_outputs(g, n);
  return c;
}

}  // namespace

void add_communication_ops(OpTable& t) {
  for (const char* op : {"accel_sim::all_reduce", "accel_sim::all_gather",
                         "accel_sim::reduce_scatter", "accel_sim::all_to_all"}) {
    t[op] = count_collective;
  }
}

}  // namespace accelsim::ops
