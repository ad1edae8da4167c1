// Shell quoting, launch templates and the remote rank script; see remote_command.h.
#include "launcher/remote_command.h"

namespace kolo::launcher {
namespace {

bool IsShellSafe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '/' || c == ':' || c == ',' || c == '+' || c == '@' ||
         c == '%' || c == '=';
}

void ReplaceAll(std::string* text, const std::string& from, const std::string& to) {
  for (size_t at = text->find(from); at != std::string::npos;
       at = text->find(from, at + to.size())) {
    text->replace(at, from.size(), to);
  }
}

}  // namespace

std::string ShellQuote(const std::string& text) {
  bool safe = !text.empty() && text[0] != '=';
  for (char c : text) safe = safe && IsShellSafe(c);
  if (safe) return text;
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) {
    if (!joined.empty()) joined += ' ';
    joined += ShellQuote(word);
  }
  return joined;
}

std::string SubstituteTemplate(const std::string& launch_template, const Host& host) {
  std::string text = launch_template;
  ReplaceAll(&text, "{host}", ShellQuote(host.name));
  ReplaceAll(&text, "{addr}", ShellQuote(host.Reachable()));
  return text;
}

std::string RemoteScript(const std::string& working_dir, const std::vector<EnvVar>& vars,
                         const std::vector<std::string>& command) {
  std::vector<std::string> env_command = {"env"};
  for (const auto& [name, value] : vars) env_command.push_back(name + "=" + value);
  env_command.insert(env_command.end(), command.begin(), command.end());
  // `read` takes the secret line byte by byte, leaving the rest of stdin to the watcher, which
  // gets it as fd 3 (an asynchronous list's stdin is otherwise /dev/null). The watcher's output
  // goes to /dev/null so that it never keeps the ssh session open.
  return "IFS= read -r KOLO_SECRET || { echo \"kolorun: no job secret on stdin\" >&2; exit 126; }\n"
         "export KOLO_SECRET\n"
         "cd " +
         ShellQuote(working_dir) +
         " || exit 126\n"
         "exec 3<&0\n" +
         ShellJoin(env_command) + " </dev/null 3<&- &\n" +
         "rank=$!\n"
         "{ cat >/dev/null; kill -TERM $rank || exit; i=0\n"
         "  while kill -0 $rank && [ $i -lt 5 ]; do sleep 1; i=$((i+1)); done\n"
         "  kill -KILL $rank; } <&3 >/dev/null 2>&1 &\n"
         "watcher=$!\n"
         "exec 3<&-\n"
         "wait $rank\n"
         "code=$?\n"
         "kill $watcher 2>/dev/null\n"
         "exit $code\n";
}

std::vector<std::string> SshArgv(const SshConfig& ssh, const Host& host,
                                 const std::string& script) {
  std::vector<std::string> argv = {ssh.program, "-o", "BatchMode=yes"};
  if (ssh.port > 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(ssh.port));
  }
  if (!ssh.identity.empty()) {
    argv.push_back("-i");
    argv.push_back(ssh.identity);
  }
  argv.push_back("--");
  argv.push_back(host.name);
  argv.push_back("sh -c " + ShellQuote(script));
  return argv;
}

}  // namespace kolo::launcher
