// RemoteCommand: the command lines that start a rank on another host, through ssh or through a
// --launch-cmd template, with POSIX shell quoting. Pure functions for kolorun's main thread and
// for tests.
//
// Over ssh the job secret must not appear on a command line (ps on either host would show it),
// so the remote command is a small /bin/sh script that first reads KOLO_SECRET from its
// standard input (kolorun writes it into the ssh process's stdin pipe), exports it and starts
// the rank in the background with stdin from /dev/null. The script then waits on its stdin:
// when it reaches end of file (kolorun stopped the ssh process, or kolorun itself died and the
// pipe closed, so sshd closed the session) it sends SIGTERM to the rank and SIGKILL 5 s later.
// This kills remote ranks without `ssh -tt`, whose terminal would echo the secret.
#pragma once

#include <string>
#include <vector>

#include "launcher/host_list.h"
#include "launcher/job_environment.h"

namespace kolo::launcher {

// `text` as one word of a POSIX shell: unchanged if it holds only safe characters, otherwise
// in single quotes (a quote inside becomes '\'').
std::string ShellQuote(const std::string& text);

// The words quoted and joined with spaces.
std::string ShellJoin(const std::vector<std::string>& words);

// `launch_template` with every `{host}` replaced by the host's name and every `{addr}` by its
// reachable address (both shell-quoted).
std::string SubstituteTemplate(const std::string& launch_template, const Host& host);

// The /bin/sh script run on the remote host (see the file comment): cd to `working_dir`, read
// KOLO_SECRET from stdin, run `command` with `vars` added to its environment, stop it at EOF
// on stdin, exit with its code (128 + signal if it was killed).
std::string RemoteScript(const std::string& working_dir, const std::vector<EnvVar>& vars,
                         const std::vector<std::string>& command);

struct SshConfig {
  std::string program = "ssh";  // --rsh: another ssh-compatible program
  int port = 0;                 // -p; 0: ssh's default
  std::string identity;         // -i; empty: ssh's default
};

// The argv that runs `script` on `host` over ssh: `ssh -o BatchMode=yes [-p P] [-i I] -- NAME
// 'sh -c <script>'`. The remote login shell only sees `sh -c '...'`, so the script runs under
// /bin/sh whatever the user's shell is.
std::vector<std::string> SshArgv(const SshConfig& ssh, const Host& host, const std::string& script);

}  // namespace kolo::launcher
