// kolo::version() and the header/library version check of init() (runtime/version_check.h).
#include <string>

#include "kolo/kolo.h"
#include "runtime/version_check.h"

namespace kolo {
namespace {

std::string VersionName(int number) {
  return std::to_string(number / 10000) + "." + std::to_string(number / 100 % 100) + "." +
         std::to_string(number % 100);
}

}  // namespace

const char* version() {
  return KOLO_VERSION_STRING;
}

Status CheckHeaderVersion(int header_version) {
  if (header_version >= 0 && header_version / 100 == KOLO_VERSION_NUMBER / 100) {
    return Status::Ok();
  }
  const std::string header =
      header_version >= 0 ? VersionName(header_version) : std::to_string(header_version);
  return FailedPrecondition("kolo::init(): this program was compiled with the headers of kolo " +
                            header + " but runs with the library of kolo " + KOLO_VERSION_STRING +
                            " (major.minor must match); rebuild it against this kolo or run it "
                            "with the libkolo it was built with");
}

}  // namespace kolo
