#include "launcher_lab.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>

#include "lab.h"

namespace podnet::tool {

LabPlacement::~LabPlacement() {
  for (Host& h : hosts)
    if (h.ns_fd >= 0) ::close(h.ns_fd);
}

Result<std::unique_ptr<LabPlacement>> place_on_lab(const std::string& lab_name, const std::vector<std::string>& hosts,
                                                   int ranks_per_host, int nranks) {
  PODNET_ASSIGN_OR_RETURN(lab::Spec spec, lab::load_spec(lab_name));
  auto p = std::make_unique<LabPlacement>();
  p->lab = lab_name;
  p->rails = spec.rails;
  std::vector<int> order;
  if (hosts.empty()) {
    for (int h = 0; h < spec.hosts; ++h) order.push_back(h);
  } else {
    for (const std::string& text : hosts) {
      PODNET_ASSIGN_OR_RETURN(int h, lab::parse_host(text, spec.hosts));
      if (std::find(order.begin(), order.end(), h) != order.end())
        return Status::InvalidArgument("--hosts lists h{} twice", h);
      order.push_back(h);
    }
  }
  const int nhosts = static_cast<int>(order.size());
  const int per_host = ranks_per_host > 0 ? ranks_per_host : (nranks + nhosts - 1) / nhosts;
  if (static_cast<long>(per_host) * nhosts < nranks)
    return Status::InvalidArgument("{} ranks do not fit on {} host{} with {} rank{} per host", nranks, nhosts,
                                   nhosts == 1 ? "" : "s", per_host, per_host == 1 ? "" : "s");
  const int used = (nranks + per_host - 1) / per_host;
  for (int i = 0; i < used; ++i) {
    LabPlacement::Host h;
    h.index = order[static_cast<size_t>(i)];
    h.ns = lab::host_ns(lab_name, h.index);
    h.ns_fd = ::open(("/run/netns/" + h.ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (h.ns_fd < 0)
      return Status::Unavailable("lab '{}': open /run/netns/{}: {} (is the lab intact? `podnet lab status --name {}`)",
                                 lab_name, h.ns, strerror(errno), lab_name);
    p->hosts.push_back(std::move(h));
  }
  for (int r = 0; r < nranks; ++r) {
    int hi = r / per_host;
    p->host_of_rank.push_back(hi);
    p->local_rank.push_back(p->hosts[static_cast<size_t>(hi)].ranks++);
  }
  p->store_ip = lab::host_address(p->hosts[0].index, 0);
  return p;
}

Result<std::unique_ptr<bootstrap::StoreServer>> start_store_in(int ns_fd, const std::string& ip) {
  int home = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) return Status::Unavailable("open /proc/thread-self/ns/net: {}", strerror(errno));
  if (::setns(ns_fd, CLONE_NEWNET) != 0) {
    int e = errno;
    ::close(home);
    return Status::Unavailable("setns into the lab host: {}", strerror(e));
  }
  auto store = bootstrap::StoreServer::start(ip, 0);
  // Back home before anything else: the launcher's own sockets and later forks belong there.
  if (::setns(home, CLONE_NEWNET) != 0) {
    int e = errno;
    ::close(home);
    return Status::Internal("setns back to the launcher's namespace: {}", strerror(e));
  }
  ::close(home);
  return store;
}

}  // namespace podnet::tool
