// One parser for each kind of value a configuration variable holds: integer, number (seconds,
// milliseconds), byte size, switch (0|1), choice, IP address, host:port, rank lists. The config
// table's rows (core/config/config_builder.h), the launcher variables (launcher_env) and
// Horovod's variables (horovod_env) all parse through these. Each takes the name the value was
// read from (a KOLO_ name, an alias, a launcher's variable) and refuses anything outside the
// documented grammar with InvalidArgument naming that variable, quoting the value and saying
// what is accepted. Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// The grammar every kind shares, printed by `kolorun --help-env` and the README.
extern const char kConfigValueGrammar[];

// `name`='`text`' is invalid: expected `expected`.
Status InvalidConfigValue(const std::string& name, const std::string& text,
                          const std::string& expected);

// Integers: decimal digits only (no sign, space, '0x' or fraction), in [lo, hi].
std::string IntegerExpected(int64_t lo, int64_t hi);  // "an integer in [lo, hi]"
bool ParseDecimalInteger(const std::string& text, int64_t* out);
StatusOr<int64_t> ParseIntegerValue(const std::string& name, const std::string& text, int64_t lo,
                                    int64_t hi);

// Numbers: decimal digits with an optional fraction and exponent ("30", "0.5", ".5", "2e3"); no
// sign, space, hex, inf or nan. In [lo, hi].
std::string NumberExpected(double lo, double hi);  // "a number in [lo, hi]"
bool ParseDecimalNumber(const std::string& text, double* out);
StatusOr<double> ParseNumberValue(const std::string& name, const std::string& text, double lo,
                                  double hi);

// Byte sizes: an integer with an optional binary unit K, M or G (also KB/KiB, MB/MiB, GB/GiB,
// B; any case), in [lo, hi] bytes.
std::string ByteSizeExpected(int64_t lo, int64_t hi);  // "a byte size in [0, 4G] such as ..."
// Rejects signs, fractions, junk and values that overflow int64; the error names no variable.
StatusOr<int64_t> ParseByteSize(const std::string& text);
StatusOr<int64_t> ParseByteSizeValue(const std::string& name, const std::string& text, int64_t lo,
                                     int64_t hi);

// Switches: exactly "0" or "1" (not true/false/yes/no, not empty).
extern const char kBoolExpected[];  // "0 or 1"
StatusOr<bool> ParseBoolValue(const std::string& name, const std::string& text);

// Choices: one of `choices`, in any case (as Horovod reads NCCL, GLOO, INFO). The index.
std::string ChoiceExpected(const std::vector<const char*>& choices);  // "one of a, b, c"
bool MatchChoice(const std::string& text, const std::vector<const char*>& choices, size_t* index);
StatusOr<size_t> ParseChoiceValue(const std::string& name, const std::string& text,
                                  const std::vector<const char*>& choices);

// IP addresses: an IPv4 or IPv6 literal (no brackets, no port, no host name), not 0.0.0.0 or ::
// (peers must be able to dial it).
extern const char kIpAddressExpected[];
Status CheckIpAddressValue(const std::string& name, const std::string& text);

// host:port: a host name (letters, digits, '.', '-', '_'), an IPv4 literal, or an IPv6 literal
// with or without brackets, then ':' and a port in [1, 65535] (digits only).
extern const char kHostPortExpected[];
Status CheckHostPortValue(const std::string& name, const std::string& text);

// Rank lists (KOLO_PROCESS_SETS): sets separated by ';', ranks by ','; spaces and one trailing
// ';' allowed; empty: none. Each set is checked as add_process_set() checks one: ranks in
// [0, size), none twice, no set twice, and not the global set (every rank of the job; skipped
// while `size` is unknown, i.e. 0). The sets sorted, in order.
extern const char kRankListsExpected[];
StatusOr<std::vector<std::vector<int>>> ParseRankListsValue(const std::string& name,
                                                            const std::string& text, int size);

}  // namespace kolo
