#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include "accelsim/pipeline.h"
#include "bindings.h"

namespace nb = nanobind;

namespace accelsim::bindings {

void bind_pipeline(nb::module_& m) {
  nb::enum_<PipelineWork>(m, "PipelineWork")
      .value("forward", PipelineWork::forward)
      .value("backward", PipelineWork::backward)
      .value("send", PipelineWork::send);

  nb::class_<PipelineEvent>(m, "PipelineEvent")
      .def_ro("stage", &PipelineEvent::stage)
      .def_ro("chunk", &PipelineEvent::chunk)
      .def_ro("micro_batch", &PipelineEvent::micro_batch)
      .def_ro("work", &PipelineEvent::work)
      .def_ro("start_s", &PipelineEvent::start_s)
      .def_ro("end_s", &PipelineEvent::end_s)
      .def_ro("to_stage", &PipelineEvent::to_stage)
      .def_ro("payload", &PipelineEvent::payload);

  nb::class_<PipelineSchedule>(m, "PipelineSchedule")
      .def_ro("events", &PipelineSchedule::events)
      .def_ro("makespan_s", &PipelineSchedule::makespan_s)
      .def_ro("bubble_s", &PipelineSchedule::bubble_s);

  m.def(
      "schedule_pipeline",
      [](int64_t stages, int64_t virtual_stages, int64_t micro_batches, double forward_s,
         double backward_s, double p2p_s) {
        nb::gil_scoped_release release;
        return schedule_pipeline(stages, virtual_stages, micro_batches, forward_s, backward_s, p2p_s);
      },
      nb::arg("stages"), nb::arg("virtual_stages"), nb::arg("micro_batches"), nb::arg("forward_s"),
      nb::arg("backward_s"), nb::arg("p2p_s") = 0.0);
}

}  // namespace accelsim::bindings
