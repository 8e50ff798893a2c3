#include "bootstrap/launch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace podnet::bootstrap {
namespace {

using Env = std::map<std::string, std::string>;

Result<LaunchInfo> detect(const Env& env) {
  return detect_launch([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

void expect_info(const Env& env, const std::string& launcher, int rank, int size, int local,
                 const std::string& store) {
  auto r = detect(env);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->launcher, launcher);
  EXPECT_EQ(r->rank, rank);
  EXPECT_EQ(r->world_size, size);
  EXPECT_EQ(r->local_rank, local);
  EXPECT_EQ(r->store, store);
}

void expect_error(const Env& env, const std::string& needle) {
  auto r = detect(env);
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << needle;
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(LaunchEnv, NothingSetIsASingleProcess) { expect_info({}, "single", 0, 1, 0, ""); }

TEST(LaunchEnv, Podnet) {
  expect_info({{"PODNET_RANK", "3"}, {"PODNET_WORLD_SIZE", "8"}, {"PODNET_LOCAL_RANK", "1"},
               {"PODNET_STORE", "127.0.0.1:29500"}},
              "podnet", 3, 8, 1, "127.0.0.1:29500");
}

TEST(LaunchEnv, Torchrun) {
  expect_info({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "5"}, {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", "29400"}},
              "torchrun", 5, 16, 5, "127.0.0.1:29400");
}

TEST(LaunchEnv, Slurm) {
  expect_info({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"}}, "slurm", 7, 8, 3, "");
}

TEST(LaunchEnv, OpenMpi) {
  expect_info({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}},
              "openmpi", 2, 4, 0, "");
}

TEST(LaunchEnv, Pmi) { expect_info({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}, "pmi", 1, 2, 0, ""); }

TEST(LaunchEnv, PrecedenceFollowsDesignOrder) {
  Env all = {{"PODNET_RANK", "1"},  {"PODNET_WORLD_SIZE", "2"},    {"RANK", "3"},
             {"WORLD_SIZE", "4"},   {"SLURM_PROCID", "5"},         {"SLURM_NTASKS", "6"},
             {"OMPI_COMM_WORLD_RANK", "7"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"PMI_RANK", "9"},
             {"PMI_SIZE", "10"}};
  expect_info(all, "podnet", 1, 2, 0, "");
  all.erase("PODNET_RANK");
  all.erase("PODNET_WORLD_SIZE");
  expect_info(all, "torchrun", 3, 4, 0, "");
  all.erase("RANK");
  all.erase("WORLD_SIZE");
  expect_info(all, "slurm", 5, 6, 0, "");
  all.erase("SLURM_PROCID");
  all.erase("SLURM_NTASKS");
  expect_info(all, "openmpi", 7, 8, 0, "");
  all.erase("OMPI_COMM_WORLD_RANK");
  all.erase("OMPI_COMM_WORLD_SIZE");
  expect_info(all, "pmi", 9, 10, 0, "");
}

TEST(LaunchEnv, PodnetStoreOverridesLauncherStore) {
  expect_info({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"},
               {"PODNET_STORE", "127.0.0.1:2"}},
              "torchrun", 0, 2, 0, "127.0.0.1:2");
  expect_info({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"PODNET_STORE", "127.0.0.1:3"}}, "slurm", 0, 2, 0,
              "127.0.0.1:3");
}

TEST(LaunchEnv, PodnetMinusOneMeansDetect) {
  expect_info({{"PODNET_RANK", "-1"}, {"PODNET_WORLD_SIZE", "-1"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}},
              "torchrun", 1, 2, 0, "");
}

TEST(LaunchEnv, BadValuesQuoteTheVariable) {
  expect_error({{"RANK", "abc"}, {"WORLD_SIZE", "4"}}, "RANK=\"abc\"");
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "4x"}}, "WORLD_SIZE=\"4x\"");
  expect_error({{"RANK", " 1"}, {"WORLD_SIZE", "4"}}, "RANK=\" 1\"");
  expect_error({{"SLURM_PROCID", "-2"}, {"SLURM_NTASKS", "4"}}, "SLURM_PROCID=\"-2\"");
  expect_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}, "PMI_SIZE=\"0\"");
  expect_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "99999999999"}}, "PMI_SIZE=\"99999999999\"");
  expect_error({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}, "OMPI_COMM_WORLD_RANK=\"4\"");
  expect_error({{"PODNET_RANK", "0"}, {"PODNET_WORLD_SIZE", "2"}, {"PODNET_LOCAL_RANK", "x"}},
               "PODNET_LOCAL_RANK=\"x\"");
  expect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "2"}}, "SLURM_LOCALID=\"2\"");
  expect_error({{"PODNET_STORE", "nohostport"}}, "PODNET_STORE=\"nohostport\"");
  expect_error({{"PODNET_STORE", "127.0.0.1:70000"}}, "PODNET_STORE=\"127.0.0.1:70000\"");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "http"}},
               "MASTER_PORT=\"http\"");
}

TEST(LaunchEnv, PartialSetsAreErrors) {
  expect_error({{"PODNET_RANK", "0"}}, "PODNET_RANK=\"0\" is set but PODNET_WORLD_SIZE is not");
  expect_error({{"WORLD_SIZE", "4"}}, "WORLD_SIZE=\"4\" is set but RANK is not");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}}, "MASTER_PORT is not");
}

}  // namespace
}  // namespace podnet::bootstrap
