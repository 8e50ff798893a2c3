// podnet run -n N [options] [--] CMD [ARGS...]: starts N local ranks with a rendezvous store
// (see launcher.h for the process management).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "launcher.h"

namespace podnet::tool {

namespace {

constexpr const char* kRunFooter = R"(Usage: podnet run -n N [options] [--] CMD [ARGS...]
Runs CMD with ARGS N times on this host, as ranks 0 .. N-1 of one job. Everything from the
first argument that is not an option on (or after "--") belongs to CMD.

Every rank gets the launcher's environment, then the --env variables, then:
  PODNET_RANK=i                 this rank, 0 .. N-1
  PODNET_WORLD_SIZE=N           number of ranks
  PODNET_LOCAL_RANK=i           rank on this host (every rank is local: same as PODNET_RANK)
  PODNET_LOCAL_WORLD_SIZE=N     number of ranks on this host
  PODNET_STORE=127.0.0.1:PORT   the rendezvous store that the launcher hosts for the job
  PODNET_IFNAME=lo              only when not set already: local ranks talk over loopback

Rank i is bound to the i-th CPU the launcher may use when there are at least N of them (as
mpirun binds small jobs): ranks that wait for each other never share a CPU by accident. With
fewer CPUs (C) than ranks, rank i is bound to CPU i*C/N: consecutive ranks share a CPU in
equal blocks, the same placement every run (not in a lab: lab ranks stay unbound then).
--bind-to none leaves placement to the scheduler.
The default, auto, is core except with PODNET_TRANSPORT=verbs when every RDMA device is a
software one (rdma_rxe, siw): its protocol work runs on the ranks' CPUs, and bound ranks
cannot move away from it (docs/verbs.md).

With --lab NAME the ranks run inside the hosts of that lab (`podnet lab up`; docs/lab.md):
ranks 0 .. K-1 on the first host (of --hosts, default every host h0, h1, ...), the next K on
the second, ...; K is --ranks-per-host, default as few per host as fit. Each rank enters its
host's network namespace and gets that namespace's name as hostname. Then:
  PODNET_LOCAL_RANK, PODNET_LOCAL_WORLD_SIZE   among the ranks on the same lab host
  PODNET_STORE=10.199.0.X:PORT  the store, listening inside the first host on its rail-0 address
  PODNET_IFNAME=^eth            only when not set: the lab interfaces, never loopback
  PODNET_RAILS=R                only when not set: every rail of the lab (one connection set each)
  PODNET_LAB=NAME, PODNET_LAB_HOST=h<i>   where the rank runs
Ranks read stdin from /dev/null. Each rank runs in its own process group; signals from the
launcher go to that whole group. A rank dies with SIGKILL if the launcher itself dies.

Output: each line a rank writes is forwarded as soon as it is complete, as "[i] line" (stdout
to stdout, stderr to stderr). Lines are never mixed; a last line without a newline gets one.

Stopping:
  - a rank that exits non-zero or is killed by a signal is reported on stderr ("rank 2 (pid
    1234) exited with code 3"); the other ranks get SIGTERM, then SIGKILL after --grace-ms;
  - SIGINT, SIGTERM or SIGHUP sent to the launcher are forwarded to every rank, then SIGKILL
    after --grace-ms; a second one sends SIGKILL at once (a signal the launcher was started
    with ignored, as under nohup, stays ignored by the launcher and the ranks);
  - --timeout names the ranks still running, then stops them the same way.

Exit code: 0 when every rank exited 0; else the exit code of the first rank that failed
(128 + signal number when it was killed by a signal); 124 on --timeout; 128 + signal number
when the launcher was interrupted; 127 when CMD is not found, 126 when it cannot be executed;
1 for other launcher errors (bad option, store or fork failure).

Examples:
  podnet run -n 4 -- sh -c 'echo rank $PODNET_RANK of $PODNET_WORLD_SIZE'
  podnet run -n 8 --timeout 600 --env PODNET_LOG=info -- ./my_training --steps 100
  podnet run --lab demo -n 8 --ranks-per-host 2 -- podnet bench coll allreduce -b 1M -e 64M)";

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<JobOptions>();
  CLI::App* run = app.add_subcommand("run", "start N local ranks of a command, with a rendezvous store");
  run->footer(kRunFooter);
  run->add_option("-n,--np", options->nranks, "number of ranks to start")
      ->required()
      ->type_name("N")
      ->check(CLI::Range(1, 4096));
  run->add_option("--env", options->env, "add KEY=VALUE to every rank's environment (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);  // one KEY=VALUE per --env, so CMD is never swallowed
  auto no_prefix = std::make_shared<bool>(false);
  run->add_flag("--no-prefix", *no_prefix, "forward output lines as they are, without \"[rank] \"");
  run->add_option("--grace-ms", options->grace_ms,
                  "how long stopping ranks get between SIGTERM (or a forwarded signal) and SIGKILL")
      ->type_name("MS")
      ->default_val(3000)
      ->check(CLI::NonNegativeNumber);
  run->add_option("--timeout", options->timeout_s, "stop every rank and exit 124 after this many seconds; 0: none")
      ->type_name("SEC")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
  run->add_option("--bind-to", options->bind_to,
                  "core: bind rank i to the i-th CPU this launcher may use (with C < N CPUs: to CPU i*C/N, "
                  "consecutive ranks sharing one; not lab ranks); "
                  "none: leave placement to the scheduler; auto: core, except none for PODNET_TRANSPORT=verbs "
                  "over a software RDMA device (rxe, siw)")
      ->type_name("auto|core|none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "core", "none"}));
  run->add_option("--lab", options->lab, "start the ranks inside the hosts of this lab (podnet lab up)")
      ->type_name("NAME");
  run->add_option("--hosts", options->lab_hosts, "with --lab: the lab hosts to use, in order (default: all)")
      ->type_name("h0,h1,...")
      ->delimiter(',')
      ->allow_extra_args(false);
  run->add_option("--ranks-per-host", options->ranks_per_host,
                  "with --lab: ranks per host (default: N / hosts, rounded up)")
      ->type_name("K")
      ->check(CLI::Range(1, 4096));
  // Everything from the first argument that is not an option (or from "--") on is CMD and its
  // arguments, so CMD's own options (sh -c ...) are not taken for podnet's. prefix_command()
  // sends those arguments to remaining(). The positional below only documents CMD in --help
  // and makes CLI11 keep a "--" for us instead of handing CMD back to the parent app; its
  // validator refuses every value, so it never takes one.
  run->prefix_command();
  run->validate_positionals();
  run->add_option("CMD", "the command every rank runs, with its arguments")
      ->type_name("[ARGS...]")
      ->check(CLI::Validator([](const std::string&) { return std::string("collected by prefix_command"); }, ""));
  run->callback([run, options, no_prefix] {
    options->prefix = !*no_prefix;
    std::vector<std::string> command = run->remaining();
    if (!command.empty() && command.front() == "--") command.erase(command.begin());
    options->command = std::move(command);
    if (options->lab.empty() && (!options->lab_hosts.empty() || options->ranks_per_host > 0)) {
      std::fprintf(stderr, "podnet run: --hosts and --ranks-per-host need --lab NAME\n");
      return set_exit_code(kExitSetupFailed);
    }
    set_exit_code(run_job(*options));
  });
}

}  // namespace podnet::tool
