"""`DeviceProfile`: the original accel-sim's device description, kept working.

    DeviceProfile(name="future_chip", compute_tflops=1000.0, memory_bandwidth=5000.0,
                  memory_limit_gb=128.0)

The original profile has one compute peak for every dtype; it maps onto a Device whose matrix
and vector peaks are all `compute_tflops`. `memory_bandwidth` is in GB/s, `memory_limit_gb` in
GiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from accel_sim.device import Device


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    compute_tflops: float
    memory_bandwidth: float  # GB/s
    memory_limit_gb: float  # GiB
    kernel_launch_overhead_us: float = 0.0

    def to_device(self) -> Device:
        peak = self.compute_tflops
        return Device(
            self.name,
            memory_bandwidth_gbs=self.memory_bandwidth,
            memory_gb=self.memory_limit_gb,
            bf16_tflops=peak,
            fp16_tflops=peak,
            fp32_tflops=peak,
            tf32_tflops=peak,
            fp8_tflops=peak,
            int8_tops=peak,
            fp64_tflops=peak,
            kernel_launch_overhead_us=self.kernel_launch_overhead_us,
        )


def get_profile(name: str) -> Device:
    """A shipped device by name (`v100`, `a100`, `h100`, `tpu-v4`, ...)."""
    return Device(name)
