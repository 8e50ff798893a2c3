// `podnet run --lab NAME`: where each rank of a job runs among a lab's hosts (lab.h), and the
// rendezvous store started inside the first host's namespace so that every rank reaches it
// over the lab's rail-0 network.
//
// Placement is in blocks: with K ranks per host, ranks 0 .. K-1 run on the first host of the
// list, K .. 2K-1 on the second, and so on (K defaults to ceil(N / hosts)).
// Thread-safety: none; used by the launcher's main thread before any rank starts.
#pragma once

#include <podnet/status.h>

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.h"

namespace podnet::tool {

struct LabPlacement {
  struct Host {
    int index = 0;   // lab host index (h<index>)
    std::string ns;  // its namespace
    int ns_fd = -1;  // /run/netns/<ns>, O_CLOEXEC; what a rank setns()es into
    int ranks = 0;   // ranks placed here
  };
  std::string lab;
  int rails = 1;
  std::vector<Host> hosts;        // the hosts in use, in placement order
  std::vector<int> host_of_rank;  // rank -> index into hosts
  std::vector<int> local_rank;    // rank -> rank among those on its host
  std::string store_ip;           // rail-0 address of hosts[0]

  LabPlacement() = default;
  LabPlacement(const LabPlacement&) = delete;
  LabPlacement& operator=(const LabPlacement&) = delete;
  ~LabPlacement();
};

// `hosts`: entries "h3" or "3" (empty: every host of the lab); `ranks_per_host` 0: as few per
// host as fit. Fails when the lab is not up, a host is unknown or listed twice, or the ranks
// do not fit.
Result<std::unique_ptr<LabPlacement>> place_on_lab(const std::string& lab, const std::vector<std::string>& hosts,
                                                   int ranks_per_host, int nranks);

// Starts a store listening on ip:0 inside the namespace of `ns_fd`. The calling thread enters
// that namespace only for the socket's creation (setns of a network namespace affects only the
// calling thread) and is back in its own when this returns, success or not.
Result<std::unique_ptr<bootstrap::StoreServer>> start_store_in(int ns_fd, const std::string& ip);

}  // namespace podnet::tool
