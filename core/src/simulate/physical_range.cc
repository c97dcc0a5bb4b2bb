#include "accelsim/physical_range.h"

#include <string>

#include "accelsim/error.h"

namespace accelsim {

void throw_out_of_physical_range(std::string_view where, std::string_view figure, double value) {
  throw PhysicalRangeError(std::string(where) + ": " + std::string(figure) +
                           (std::isfinite(value) ? " is negative (" : " is not finite (") + number_text(value) +
                           "); an input is out of physical range");
}

}  // namespace accelsim
