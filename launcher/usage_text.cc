// The text of `kolorun --help`: kolo's own options, then horovodrun's by its groups.
#include <string>

#include "launcher/launch_options.h"
#include "launcher/option_table.h"

namespace kolo::launcher {
namespace {

std::string HorovodrunText() {
  return R"(
kolorun also takes every option of horovodrun (Horovod 0.28.1) in each of its spellings: -np N,
--num-proc=N, -p2222, or a unique prefix of a --long name (--fusion-thr 32). Listed below by
horovodrun's groups, each with what kolo does with it. One that has no effect in kolo prints one
line on stderr saying why. The command line wins over --config-file, which wins over the
environment.
)";
}

}  // namespace

std::string UsageText() {
  return R"(Usage: kolorun -np N [OPTIONS] [--] PROGRAM [ARGS...]
       kolorun [-np N] -H HOST[=ADDR][:SLOTS],... | --hostfile FILE [OPTIONS] [--] PROGRAM ...
       kolorun --help | --help-env | --version | --check-build

Starts N processes (ranks) of PROGRAM, each in its own process group, and waits for them.
Every output line of a rank is prefixed with "[rank] " (stdout to stdout, stderr to stderr).
Ranks read their standard input from /dev/null.

Options:
  -np N, -n N, --num-proc N
                        number of ranks, 1..1024 (with a host list: default one per slot)
  -H, --host, --hosts LIST
                        hosts: NAME[=ADDR][:SLOTS],... (SLOTS default 1); ranks fill the
                        first host's slots first. ADDR is where the other ranks reach NAME.
  --hostfile, -hostfile FILE
                        hosts, one per line: NAME [slots=N] [address=ADDR]; '#' comments
  --launch-cmd TEMPLATE start every rank as "TEMPLATE PROGRAM ARGS..." through /bin/sh, with
                        {host} and {addr} replaced (e.g. 'ip netns exec {host}'); no ssh
  -p, --ssh-port PORT   ssh port for remote hosts
  -i, --ssh-identity, --ssh-identity-file F
                        ssh identity file for remote hosts
  --rsh PROGRAM         an ssh-compatible program to use instead of ssh
  -x NAME[=VALUE]       also pass NAME to ranks started over ssh (KOLO_* and HOROVOD_*
                        variables are passed on by default)
  --start-timeout S     ranks fail init() if the job is not complete after S seconds
                        (sets KOLO_START_TIMEOUT_SECONDS)
  --output-dir DIR      also write each rank's raw stdout and stderr to DIR/rank.N.out and
                        DIR/rank.N.err (DIR is created)
  --bind-to core|none   core (default): bind the ranks started on this host to disjoint
                        blocks of the CPUs kolorun may use, when there are at least as many
                        CPUs as such ranks (and two or more ranks), and tell them so
                        (KOLO_CPU_BIND=core); none: leave placement to the scheduler
                        (for several jobs on one host: each binds from the first CPU), and
                        give each rank here an equal share of the CPUs as its threads
                        (OMP_NUM_THREADS, unless set), as torchrun does
  --dry-run             print each rank's host, command line and environment; start nothing
  --                    ends kolorun's options; what follows is the program and its arguments
  -h, --help            print this text
  --help-env            print the configuration variables the kolo runtime reads

Elastic jobs (docs/ELASTIC.md): the job keeps training when ranks fail and grows when hosts
appear; each process asks kolorun for its rank at every init():
  --min-np, --min-num-proc N
                        fewer ranks than N for --elastic-timeout ends the job (default -np)
  --max-np, --max-num-proc N
                        never more ranks than N (default: every slot)
  --host-discovery-script P  a program printing the usable hosts, one "HOST[:SLOTS]" a line;
                        run every second (instead of -H/--hostfile)
  --slots, --slots-per-host N
                        slots of a discovered host whose line gives none (default 1)
  --elastic-timeout S   how long to wait for --min-np ranks, or for every rank to rejoin
                        (default 600)
  --reset-limit N       end the job after N re-formations
  --blacklist-cooldown-range MIN MAX  a host whose rank failed may be used again after a
                        cooldown growing from MIN to at most MAX seconds (default: never)
A worker's lines are prefixed "[HOST:SLOT] "; it gets KOLO_ELASTIC_* variables instead of
KOLO_RANK and KOLO_SIZE. A failed worker does not stop the others: they re-form without it.
kolorun exits when every worker has: 0 if the last generation's all exited 0, else the first
of their codes; 1 when fewer than --min-np were left for --elastic-timeout.

Hosts named localhost, any 127.x.y.z or this host's name run locally; others over
"ssh -o BatchMode=yes HOST", in the same working directory as kolorun.

Each rank gets, in its environment:
  KOLO_RANK, KOLO_SIZE              rank in [0, N) and N
  KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE  its index among the ranks of its host, and their number
  KOLO_CONTROLLER=HOST:PORT         127.0.0.1 or the first host's address, and a free port
  KOLO_HOSTNAME                     (host lists only) the host's name as given
  KOLO_SECRET                       a fresh 32-byte job secret, never on a command line (over
                                    ssh it travels on ssh's standard input)
  KOLO_JOB_ID                       a fresh job name, bound into every handshake
  KOLO_CPU_BIND=core                (ranks bound by --bind-to core) its CPUs are its own

SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When a rank exits with a non-zero code
or is killed by a signal, kolorun sends SIGTERM to the other ranks, SIGKILL 5 s later to those
still running, and exits with that first failure's code (128+signal for a signal). Otherwise it
exits 0 once every rank has exited 0, or 128+signal if it was itself interrupted. A rank
started over ssh is stopped when its ssh process is.
)" + HorovodrunText() +
         FormatHorovodrunGroups();
}

}  // namespace kolo::launcher
