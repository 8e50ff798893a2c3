// PODNET_SHM_PTRACER: what shm declares under Yama's ptrace_scope 1 so that sibling ranks may
// use cross-memory attach on each other (src/transport/shm/ptracer.h).
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <podnet/podnet.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "transport/shm/ptracer.h"

namespace podnet::testing {
namespace {

using shm::ptracer_for;

TEST(ShmPtracer, DeclaresOnlyAtScopeOne) {
  for (int scope : {-1, 0, 2, 3})
    for (const char* mode : {"parent", "any", "off"}) EXPECT_EQ(*ptracer_for(mode, scope, 4242), 0UL) << mode << scope;
  EXPECT_EQ(*ptracer_for("parent", 1, 4242), 4242UL);
  EXPECT_EQ(*ptracer_for("any", 1, 4242), static_cast<unsigned long>(PR_SET_PTRACER_ANY));
  EXPECT_EQ(*ptracer_for("off", 1, 4242), 0UL);
}

TEST(ShmPtracer, AnOrphanNamesNobody) {
  // Its parent is init (or a subreaper's pid 1 in a container): naming it would let every
  // process of the user in, which is what "any" is for.
  EXPECT_EQ(*ptracer_for("parent", 1, 1), 0UL);
  EXPECT_EQ(*ptracer_for("parent", 1, 0), 0UL);
}

TEST(ShmPtracer, ABadModeNamesTheKnobAndValue) {
  auto r = ptracer_for("sibling", 1, 4242);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("PODNET_SHM_PTRACER='sibling'"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("parent, any or off"), std::string::npos);
  // ... whatever the scope: a typo must not wait for a Yama host to show.
  EXPECT_FALSE(ptracer_for("sibling", -1, 4242).ok());
}

// The knob is read once per process: a fresh child ("threadsafe" death test) per case.
TEST(ShmPtracerDeathTest, ContextCreationRefusesABadMode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("PODNET_SHM_PTRACER", "sibling", 1);
  ::setenv("PODNET_TRANSPORT", "auto", 1);
  EXPECT_EXIT(
      {
        auto c = Context::create({});
        std::fprintf(stderr, "%s\n", c.ok() ? "created" : c.status().to_string().c_str());
        std::exit(c.ok() ? 0 : 3);
      },
      ::testing::ExitedWithCode(3), "PODNET_SHM_PTRACER='sibling'");
  ::unsetenv("PODNET_SHM_PTRACER");
  ::unsetenv("PODNET_TRANSPORT");
}

// The mechanism itself, where the kernel has Yama at scope 1: two sibling processes without
// CAP_SYS_PTRACE; the second reads the first's memory with process_vm_readv, refused until the
// first declares its parent its ptracer as PODNET_SHM_PTRACER=parent does.
int sibling_read(bool declare) {
  int ready[2], done[2];
  if (pipe(ready) != 0 || pipe(done) != 0) return -1;
  static volatile uint64_t value = 0x5eb1149;
  auto drop = [] { return setgid(65534) == 0 && setuid(65534) == 0; };  // nobody
  pid_t a = fork();
  if (a == 0) {
    if (!drop() || (declare && !shm::declare_ptracer("parent").ok())) _exit(1);
    char c = 1;
    if (write(ready[1], &c, 1) != 1 || read(done[0], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  char c = 0;
  if (read(ready[0], &c, 1) != 1) return -1;
  pid_t b = fork();
  if (b == 0) {
    if (!drop()) _exit(100);
    uint64_t got = 0;
    iovec l{&got, sizeof got}, r{const_cast<uint64_t*>(&value), sizeof got};
    ssize_t n = process_vm_readv(a, &l, 1, &r, 1, 0);
    _exit(n == sizeof got && got == value ? 0 : (n < 0 && errno == EPERM ? 1 : 2));
  }
  int st_b = 0, st_a = 0;
  waitpid(b, &st_b, 0);
  if (write(done[1], &c, 1) != 1) return -1;
  waitpid(a, &st_a, 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
  return WIFEXITED(st_b) ? WEXITSTATUS(st_b) : -1;
}

TEST(ShmPtracer, SiblingsMayAttachOnceTheParentIsDeclared) {
  if (shm::yama_ptrace_scope() != 1)
    GTEST_SKIP() << "needs Yama at ptrace_scope 1 (this kernel: "
                 << (shm::yama_ptrace_scope() < 0 ? std::string("no Yama")
                                                  : "scope " + std::to_string(shm::yama_ptrace_scope()))
                 << ")";
  if (geteuid() != 0) GTEST_SKIP() << "needs root to start the two siblings as nobody (without CAP_SYS_PTRACE)";
  EXPECT_EQ(sibling_read(false), 1) << "without a declaration Yama should refuse (EPERM)";
  EXPECT_EQ(sibling_read(true), 0) << "with the parent declared the sibling should read the value";
}

}  // namespace
}  // namespace podnet::testing
