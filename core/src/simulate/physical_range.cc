#include "accelsim/physical_range.h"

#include <sstream>

#include "accelsim/error.h"

namespace accelsim {

void throw_out_of_physical_range(std::string_view where, std::string_view figure, double value) {
  std::ostringstream message;
  message << where << ": " << figure << (std::isfinite(value) ? " is negative (" : " is not finite (") << value
          << "); an input is out of physical range";
  throw PhysicalRangeError(message.str());
}

}  // namespace accelsim
