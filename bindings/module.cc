// The extension module accel_sim._core: value types and coarse entry points of the engine.
#include <nanobind/nanobind.h>

#include "accelsim/error.h"
#include "bindings.h"

NB_MODULE(_core, m) {
  m.doc() = "accel-sim engine: graphs, devices, cost models, simulation (C++ core).";
  // ConfigError is a usage error (bad graph, device or option): a ValueError in Python.
  nanobind::exception<accelsim::ConfigError>(m, "ConfigError", PyExc_ValueError);
  accelsim::bindings::bind_graph(m);
  accelsim::bindings::bind_device(m);
  accelsim::bindings::bind_simulate(m);
  accelsim::bindings::bind_pipeline(m);
  accelsim::bindings::bind_report(m);
  accelsim::bindings::bind_model(m);
  accelsim::bindings::bind_serve(m);
  accelsim::bindings::bind_watchdog(m);
}
