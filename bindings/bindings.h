// One bind_<area>() per public-header group; module.cc calls them in dependency order.
#pragma once

#include <nanobind/nanobind.h>

namespace accelsim::bindings {

void bind_graph(nanobind::module_& m);     // dtype.h, tensor.h, graph.h, op_catalog.h
void bind_device(nanobind::module_& m);    // device.h
void bind_simulate(nanobind::module_& m);  // cost_model.h, memory.h, simulate.h
void bind_pipeline(nanobind::module_& m);  // pipeline.h
void bind_report(nanobind::module_& m);    // breakdown.h, advice.h, regression.h
void bind_model(nanobind::module_& m);     // model.h, builder.h
void bind_serve(nanobind::module_& m);     // serve.h
void bind_watchdog(nanobind::module_& m);  // ExitWatchdog (process plumbing of the command line)

}  // namespace accelsim::bindings
