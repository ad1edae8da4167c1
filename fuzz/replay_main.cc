// A stand-in for libFuzzer's main in builds without it (the default g++ build): runs every
// file named on the command line, and every regular file of every directory named, through
// LLVMFuzzerTestOneInput once, in name order. ctest uses it to replay the seed corpora and the
// inputs that once crashed a target, so that CI catches a regression without clang.
// Exits 1 if an argument cannot be read or no input was found; a failing input aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

bool ReadFile(const fs::path& path, std::string* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

// The inputs named by `arg`: itself if it is a file, its regular files if a directory.
bool CollectInputs(const fs::path& arg, std::vector<fs::path>* inputs) {
  std::error_code error;
  if (fs::is_regular_file(arg, error)) {
    inputs->push_back(arg);
    return true;
  }
  if (!fs::is_directory(arg, error)) return false;
  std::vector<fs::path> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(arg, error)) {
    if (entry.is_regular_file(error)) found.push_back(entry.path());
  }
  if (error) return false;
  std::sort(found.begin(), found.end());
  inputs->insert(inputs->end(), found.begin(), found.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;  // libFuzzer flags, meaningless here
    if (!CollectInputs(argv[i], &inputs)) {
      std::fprintf(stderr, "replay: cannot read %s (neither a file nor a directory)\n", argv[i]);
      return 1;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (usage: %s FILE_OR_DIR...)\n", argv[0]);
    return 1;
  }
  for (const fs::path& path : inputs) {
    std::string bytes;
    if (!ReadFile(path, &bytes)) {
      std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 1;
    }
    // Print first, so that the input is named if the target aborts.
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs ran without a failure\n", inputs.size());
  return 0;
}
