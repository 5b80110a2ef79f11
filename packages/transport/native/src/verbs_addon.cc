// Orchard's verbs addon: the `Verbs` table of packages/transport/src/rdma/verbs.ts over rdma-core
// (libibverbs.so.1, Linux) or Apple's RDMA library (librdma.dylib, macOS 26.2+).
//
// The library is opened with dlopen at run time so the addon loads on machines without it and the
// transport falls back to TCP. Control-path calls go through dlsym'd pointers; the data path
// (ibv_post_send, ibv_post_recv, ibv_poll_cq) is static inline in verbs.h — it dispatches through
// the context's ops table — so it is compiled here against each platform's header instead.
//
// Handles given to JavaScript are indexes into a table; work requests name memory as
// (memory region, offset, length) and are bounds-checked before a pointer reaches the NIC.

#include <napi.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <chrono>
#include <string>
#include <vector>

#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define ORCHARD_HAVE_VERBS 1
#else
#define ORCHARD_HAVE_VERBS 0
#endif

namespace {

#ifdef __APPLE__
const char* const kLibraries[] = {"librdma.dylib", "/usr/lib/librdma.dylib"};
const char* const kKind = "apple";
#else
const char* const kLibraries[] = {"libibverbs.so.1", "libibverbs.so"};
const char* const kKind = "rdma-core";
#endif

#if ORCHARD_HAVE_VERBS

// Control-path entry points, resolved with dlsym. Declared by hand because verbs.h wraps some of
// them (ibv_reg_mr, ibv_query_port) in macros over inline helpers that would need link-time symbols.
struct Lib {
  void* handle = nullptr;
  std::string library;
  std::string error;
  struct ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(struct ibv_device**) = nullptr;
  const char* (*get_device_name)(struct ibv_device*) = nullptr;
  struct ibv_context* (*open_device)(struct ibv_device*) = nullptr;
  int (*close_device)(struct ibv_context*) = nullptr;
  int (*query_port)(struct ibv_context*, uint8_t, void*) = nullptr;
  int (*query_gid)(struct ibv_context*, uint8_t, int, union ibv_gid*) = nullptr;
  struct ibv_pd* (*alloc_pd)(struct ibv_context*) = nullptr;
  int (*dealloc_pd)(struct ibv_pd*) = nullptr;
  struct ibv_mr* (*reg_mr)(struct ibv_pd*, void*, size_t, int) = nullptr;
  int (*dereg_mr)(struct ibv_mr*) = nullptr;
  struct ibv_cq* (*create_cq)(struct ibv_context*, int, void*, struct ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(struct ibv_cq*) = nullptr;
  struct ibv_qp* (*create_qp)(struct ibv_pd*, struct ibv_qp_init_attr*) = nullptr;
  int (*modify_qp)(struct ibv_qp*, struct ibv_qp_attr*, int) = nullptr;
  int (*destroy_qp)(struct ibv_qp*) = nullptr;
  const char* (*wc_status_str)(enum ibv_wc_status) = nullptr;
};

Lib g_lib;
bool g_tried = false;

template <typename T>
bool Sym(T& slot, const char* name) {
  slot = reinterpret_cast<T>(dlsym(g_lib.handle, name));
  if (!slot) {
    g_lib.error = std::string("missing symbol ") + name;
    return false;
  }
  return true;
}

bool LoadLibrary() {
  if (g_tried) return g_lib.handle != nullptr && g_lib.error.empty();
  g_tried = true;
  std::string errors;
  // ORCHARD_VERBS_LIBRARY names another library (a non-standard install, or the test suite's fake one).
  std::vector<std::string> names;
  const char* override_path = getenv("ORCHARD_VERBS_LIBRARY");
  if (override_path && *override_path) names.push_back(override_path);
  else
    for (const char* name : kLibraries) names.push_back(name);
  for (const std::string& n : names) {
    const char* name = n.c_str();
    g_lib.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (g_lib.handle) {
      g_lib.library = name;
      break;
    }
    const char* e = dlerror();
    if (!errors.empty()) errors += "; ";
    errors += e ? e : name;
  }
  if (!g_lib.handle) {
    g_lib.error = errors;
    return false;
  }
  bool ok = Sym(g_lib.get_device_list, "ibv_get_device_list") && Sym(g_lib.free_device_list, "ibv_free_device_list") &&
            Sym(g_lib.get_device_name, "ibv_get_device_name") && Sym(g_lib.open_device, "ibv_open_device") &&
            Sym(g_lib.close_device, "ibv_close_device") && Sym(g_lib.query_port, "ibv_query_port") &&
            Sym(g_lib.query_gid, "ibv_query_gid") && Sym(g_lib.alloc_pd, "ibv_alloc_pd") &&
            Sym(g_lib.dealloc_pd, "ibv_dealloc_pd") && Sym(g_lib.reg_mr, "ibv_reg_mr") &&
            Sym(g_lib.dereg_mr, "ibv_dereg_mr") && Sym(g_lib.create_cq, "ibv_create_cq") &&
            Sym(g_lib.destroy_cq, "ibv_destroy_cq") && Sym(g_lib.create_qp, "ibv_create_qp") &&
            Sym(g_lib.modify_qp, "ibv_modify_qp") && Sym(g_lib.destroy_qp, "ibv_destroy_qp");
  g_lib.wc_status_str = reinterpret_cast<const char* (*)(enum ibv_wc_status)>(dlsym(g_lib.handle, "ibv_wc_status_str"));
  return ok;
}

// One table for every kind of handle; the kind is checked on use.
enum class Kind { Context, Pd, Mr, Cq, Qp };
struct Entry {
  Kind kind;
  void* ptr;
  // Memory regions remember their bounds (and keep the slab alive through `ref`).
  uint8_t* base = nullptr;
  size_t length = 0;
  Napi::Reference<Napi::ArrayBuffer>* ref = nullptr;
};
std::vector<Entry> g_handles(1);  // handle 0 is never valid

uint32_t Put(Kind kind, void* ptr) {
  g_handles.push_back(Entry{kind, ptr});
  return static_cast<uint32_t>(g_handles.size() - 1);
}

Entry& Get(const Napi::Env& env, const Napi::Value& v, Kind kind, const char* what) {
  uint32_t h = v.As<Napi::Number>().Uint32Value();
  if (h == 0 || h >= g_handles.size() || g_handles[h].ptr == nullptr || g_handles[h].kind != kind) {
    throw Napi::Error::New(env, std::string("EINVAL: unknown ") + what + " handle " + std::to_string(h));
  }
  return g_handles[h];
}

void Require(const Napi::Env& env) {
  if (!LoadLibrary()) throw Napi::Error::New(env, "ENOENT: no verbs library: " + g_lib.error);
}

Napi::Error Errno(const Napi::Env& env, const std::string& what, int err) {
  const char* name = err == ENOSYS ? "ENOSYS" : err == EINVAL ? "EINVAL" : err == ENOMEM ? "ENOMEM" : err == ENODEV ? "ENODEV" : "EIO";
  return Napi::Error::New(env, std::string(name) + ": " + what + ": " + strerror(err));
}

Napi::Value LibraryStatus(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  bool ok = LoadLibrary();
  o.Set("kind", kKind);
  o.Set("headers", true);
  o.Set("loaded", ok);
  o.Set("library", g_lib.library);
  o.Set("error", g_lib.error);
  return o;
}

// {devices: string[], errno: number}. NULL from ibv_get_device_list (ENOSYS on kernels without RDMA)
// is reported as no devices with its errno.
Napi::Value ListDevices(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Require(env);
  Napi::Object o = Napi::Object::New(env);
  Napi::Array names = Napi::Array::New(env);
  int n = 0;
  errno = 0;
  struct ibv_device** list = g_lib.get_device_list(&n);
  int err = list ? 0 : errno;
  if (list) {
    for (int i = 0; i < n; i++) names.Set(static_cast<uint32_t>(i), g_lib.get_device_name(list[i]));
    g_lib.free_device_list(list);
  }
  o.Set("devices", names);
  o.Set("errno", err);
  o.Set("message", err ? strerror(err) : "");
  return o;
}

Napi::Value OpenDevice(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Require(env);
  std::string want = info[0].As<Napi::String>();
  int n = 0;
  struct ibv_device** list = g_lib.get_device_list(&n);
  if (!list) throw Errno(env, "ibv_get_device_list", errno ? errno : ENODEV);
  struct ibv_context* ctx = nullptr;
  bool found = false;
  for (int i = 0; i < n; i++) {
    if (want == g_lib.get_device_name(list[i])) {
      found = true;
      ctx = g_lib.open_device(list[i]);
      break;
    }
  }
  int err = errno;
  g_lib.free_device_list(list);
  if (!found) throw Napi::Error::New(env, "ENODEV: no RDMA device " + want);
  if (!ctx) throw Errno(env, "ibv_open_device(" + want + ")", err ? err : EIO);
  return Napi::Number::New(env, Put(Kind::Context, ctx));
}

Napi::Value CloseDevice(const Napi::CallbackInfo& info) {
  Entry& e = Get(info.Env(), info[0], Kind::Context, "device");
  g_lib.close_device(static_cast<struct ibv_context*>(e.ptr));
  e.ptr = nullptr;
  return info.Env().Undefined();
}

const char* PortStateName(int s) {
  switch (s) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "NOP";
  }
}

int MtuBytes(int mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
    default: return 0;
  }
}

enum ibv_mtu MtuEnum(int bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
  }
}

Napi::Value QueryPort(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Entry& e = Get(env, info[0], Kind::Context, "device");
  uint8_t port = static_cast<uint8_t>(info[1].As<Napi::Number>().Uint32Value());
  struct ibv_port_attr attr;
  memset(&attr, 0, sizeof(attr));
  int rc = g_lib.query_port(static_cast<struct ibv_context*>(e.ptr), port, &attr);
  if (rc) throw Errno(env, "ibv_query_port", rc > 0 ? rc : errno);
  Napi::Object o = Napi::Object::New(env);
  o.Set("state", PortStateName(attr.state));
  o.Set("lid", attr.lid);
  o.Set("activeMtu", MtuBytes(attr.active_mtu));
  o.Set("gidTableLength", attr.gid_tbl_len);
  return o;
}

Napi::Value QueryGid(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Entry& e = Get(env, info[0], Kind::Context, "device");
  uint8_t port = static_cast<uint8_t>(info[1].As<Napi::Number>().Uint32Value());
  int index = info[2].As<Napi::Number>().Int32Value();
  union ibv_gid gid;
  memset(&gid, 0, sizeof(gid));
  int rc = g_lib.query_gid(static_cast<struct ibv_context*>(e.ptr), port, index, &gid);
  if (rc) throw Errno(env, "ibv_query_gid", rc > 0 ? rc : errno);
  static const uint8_t zero[16] = {0};
  if (memcmp(gid.raw, zero, 16) == 0) return Napi::String::New(env, "");
  char text[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return Napi::String::New(env, text);
}

Napi::Value AllocPd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Entry& e = Get(env, info[0], Kind::Context, "device");
  struct ibv_pd* pd = g_lib.alloc_pd(static_cast<struct ibv_context*>(e.ptr));
  if (!pd) throw Errno(env, "ibv_alloc_pd", errno ? errno : ENOMEM);
  return Napi::Number::New(env, Put(Kind::Pd, pd));
}

Napi::Value DeallocPd(const Napi::CallbackInfo& info) {
  Entry& e = Get(info.Env(), info[0], Kind::Pd, "protection domain");
  g_lib.dealloc_pd(static_cast<struct ibv_pd*>(e.ptr));
  e.ptr = nullptr;
  return info.Env().Undefined();
}

// Page-aligned memory that JavaScript sees as an ArrayBuffer without copies (the IOMMU needs whole pages).
Napi::Value AllocSlab(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t want = static_cast<size_t>(info[0].As<Napi::Number>().Int64Value());
  size_t bytes = ((want + page - 1) / page) * page;
  if (bytes == 0) bytes = page;
  void* mem = nullptr;
  if (posix_memalign(&mem, page, bytes) != 0) throw Napi::Error::New(env, "ENOMEM: cannot allocate a slab");
  memset(mem, 0, bytes);
  return Napi::ArrayBuffer::New(env, mem, bytes, [](Napi::Env, void* data) { free(data); });
}

Napi::Value RegMr(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Entry& pd = Get(env, info[0], Kind::Pd, "protection domain");
  Napi::ArrayBuffer ab = info[1].As<Napi::ArrayBuffer>();
  uint8_t* base = static_cast<uint8_t*>(ab.Data());
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (reinterpret_cast<uintptr_t>(base) % page != 0) throw Napi::Error::New(env, "EINVAL: slab is not page-aligned");
  // LOCAL_WRITE only: the only access Apple grants, and all SEND/RECV needs.
  struct ibv_mr* mr = g_lib.reg_mr(static_cast<struct ibv_pd*>(pd.ptr), base, ab.ByteLength(), IBV_ACCESS_LOCAL_WRITE);
  if (!mr) throw Errno(env, "ibv_reg_mr", errno ? errno : ENOMEM);
  uint32_t h = Put(Kind::Mr, mr);
  g_handles[h].base = base;
  g_handles[h].length = ab.ByteLength();
  g_handles[h].ref = new Napi::Reference<Napi::ArrayBuffer>(Napi::Persistent(ab));
  return Napi::Number::New(env, h);
}

Napi::Value DeregMr(const Napi::CallbackInfo& info) {
  Entry& e = Get(info.Env(), info[0], Kind::Mr, "memory region");
  g_lib.dereg_mr(static_cast<struct ibv_mr*>(e.ptr));
  e.ptr = nullptr;
  delete e.ref;
  e.ref = nullptr;
  return info.Env().Undefined();
}

Napi::Value CreateCq(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Entry& e = Get(env, info[0], Kind::Context, "device");
  int depth = info[1].As<Napi::Number>().Int32Value();
  struct ibv_cq* cq = g_lib.create_cq(static_cast<struct ibv_context*>(e.ptr), depth, nullptr, nullptr, 0);
  if (!cq) throw Errno(env, "ibv_create_cq", errno ? errno : ENOMEM);
  return Napi::Number::New(env, Put(Kind::Cq, cq));
}

Napi::Value DestroyCq(const Napi::CallbackInfo& info) {
  Entry& e = Get(info.Env(), info[0], Kind::Cq, "completion queue");
  g_lib.destroy_cq(static_cast<struct ibv_cq*>(e.ptr));
  e.ptr = nullptr;
  return info.Env().Undefined();
}

// createQp(pd, type 'UC'|'RC', sendCq, recvCq, maxSendWr, maxRecvWr) -> {qp, qpn}
Napi::Value CreateQp(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Entry& pd = Get(env, info[0], Kind::Pd, "protection domain");
  std::string type = info[1].As<Napi::String>();
  Entry& scq = Get(env, info[2], Kind::Cq, "completion queue");
  Entry& rcq = Get(env, info[3], Kind::Cq, "completion queue");
  struct ibv_qp_init_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.send_cq = static_cast<struct ibv_cq*>(scq.ptr);
  attr.recv_cq = static_cast<struct ibv_cq*>(rcq.ptr);
  attr.qp_type = type == "RC" ? IBV_QPT_RC : IBV_QPT_UC;
  attr.cap.max_send_wr = info[4].As<Napi::Number>().Uint32Value();
  attr.cap.max_recv_wr = info[5].As<Napi::Number>().Uint32Value();
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  struct ibv_qp* qp = g_lib.create_qp(static_cast<struct ibv_pd*>(pd.ptr), &attr);
  if (!qp) throw Errno(env, "ibv_create_qp(" + type + ")", errno ? errno : EINVAL);
  Napi::Object o = Napi::Object::New(env);
  o.Set("qp", Put(Kind::Qp, qp));
  o.Set("qpn", qp->qp_num);
  return o;
}

Napi::Value DestroyQp(const Napi::CallbackInfo& info) {
  Entry& e = Get(info.Env(), info[0], Kind::Qp, "queue pair");
  g_lib.destroy_qp(static_cast<struct ibv_qp*>(e.ptr));
  e.ptr = nullptr;
  return info.Env().Undefined();
}

Napi::Value ModifyQpInit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct ibv_qp* qp = static_cast<struct ibv_qp*>(Get(env, info[0], Kind::Qp, "queue pair").ptr);
  struct ibv_qp_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(info[1].As<Napi::Number>().Uint32Value());
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
  int rc = g_lib.modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) throw Errno(env, "ibv_modify_qp(INIT)", rc > 0 ? rc : errno);
  return env.Undefined();
}

// modifyQpRtr(qp, port, pathMtuBytes, destQpn, destPsn, destLid, destGidText, sgidIndex)
Napi::Value ModifyQpRtr(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct ibv_qp* qp = static_cast<struct ibv_qp*>(Get(env, info[0], Kind::Qp, "queue pair").ptr);
  struct ibv_qp_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = MtuEnum(info[2].As<Napi::Number>().Int32Value());
  attr.dest_qp_num = info[3].As<Napi::Number>().Uint32Value();
  attr.rq_psn = info[4].As<Napi::Number>().Uint32Value() & 0xffffff;
  attr.ah_attr.dlid = static_cast<uint16_t>(info[5].As<Napi::Number>().Uint32Value());
  attr.ah_attr.port_num = static_cast<uint8_t>(info[1].As<Napi::Number>().Uint32Value());
  attr.ah_attr.is_global = 1;
  attr.ah_attr.grh.hop_limit = 1;
  attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(info[7].As<Napi::Number>().Uint32Value());
  std::string gid = info[6].As<Napi::String>();
  if (inet_pton(AF_INET6, gid.c_str(), attr.ah_attr.grh.dgid.raw) != 1) {
    throw Napi::Error::New(env, "EINVAL: destination GID is not an IPv6 address: " + gid);
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) {
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  int rc = g_lib.modify_qp(qp, &attr, mask);
  if (rc) throw Errno(env, "ibv_modify_qp(RTR)", rc > 0 ? rc : errno);
  return env.Undefined();
}

Napi::Value ModifyQpRts(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct ibv_qp* qp = static_cast<struct ibv_qp*>(Get(env, info[0], Kind::Qp, "queue pair").ptr);
  struct ibv_qp_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = info[1].As<Napi::Number>().Uint32Value() & 0xffffff;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) {
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  int rc = g_lib.modify_qp(qp, &attr, mask);
  if (rc) throw Errno(env, "ibv_modify_qp(RTS)", rc > 0 ? rc : errno);
  return env.Undefined();
}

struct ibv_sge Sge(const Napi::CallbackInfo& info, int mrArg) {
  Napi::Env env = info.Env();
  Entry& mr = Get(env, info[mrArg], Kind::Mr, "memory region");
  double offset = info[mrArg + 1].As<Napi::Number>().DoubleValue();
  double length = info[mrArg + 2].As<Napi::Number>().DoubleValue();
  if (offset < 0 || length < 0 || offset + length > static_cast<double>(mr.length)) {
    throw Napi::Error::New(env, "EINVAL: work request outside its memory region");
  }
  struct ibv_sge sge;
  sge.addr = reinterpret_cast<uintptr_t>(mr.base + static_cast<size_t>(offset));
  sge.length = static_cast<uint32_t>(length);
  sge.lkey = static_cast<struct ibv_mr*>(mr.ptr)->lkey;
  return sge;
}

// postSend(qp, wrId, mr, offset, length): one SEND, signaled.
Napi::Value PostSend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct ibv_qp* qp = static_cast<struct ibv_qp*>(Get(env, info[0], Kind::Qp, "queue pair").ptr);
  struct ibv_sge sge = Sge(info, 2);
  struct ibv_send_wr wr;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = static_cast<uint64_t>(info[1].As<Napi::Number>().DoubleValue());
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  struct ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp, &wr, &bad);  // static inline: qp->context->ops.post_send
  if (rc) throw Errno(env, "ibv_post_send", rc);
  return env.Undefined();
}

Napi::Value PostRecv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct ibv_qp* qp = static_cast<struct ibv_qp*>(Get(env, info[0], Kind::Qp, "queue pair").ptr);
  struct ibv_sge sge = Sge(info, 2);
  struct ibv_recv_wr wr;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = static_cast<uint64_t>(info[1].As<Napi::Number>().DoubleValue());
  wr.sg_list = &sge;
  wr.num_sge = 1;
  struct ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp, &wr, &bad);  // static inline: qp->context->ops.post_recv
  if (rc) throw Errno(env, "ibv_post_recv", rc);
  return env.Undefined();
}

Napi::Object WcToObject(Napi::Env env, const struct ibv_wc& wc);

// pollCq(cq, max) -> [{wrId, status, opcode, byteLen, qpn}]
Napi::Value PollCq(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct ibv_cq* cq = static_cast<struct ibv_cq*>(Get(env, info[0], Kind::Cq, "completion queue").ptr);
  int max = info[1].As<Napi::Number>().Int32Value();
  if (max < 1) max = 1;
  if (max > 256) max = 256;
  struct ibv_wc wc[256];
  int n = ibv_poll_cq(cq, max, wc);  // static inline: cq->context->ops.poll_cq
  if (n < 0) throw Napi::Error::New(env, "EIO: ibv_poll_cq failed");
  Napi::Array out = Napi::Array::New(env, static_cast<size_t>(n));
  for (int i = 0; i < n; i++) out.Set(static_cast<uint32_t>(i), WcToObject(env, wc[i]));
  return out;
}

Napi::Object WcToObject(Napi::Env env, const struct ibv_wc& wc) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("wrId", static_cast<double>(wc.wr_id));
  o.Set("status", static_cast<int>(wc.status));
  o.Set("opcode", (wc.opcode & IBV_WC_RECV) ? "recv" : "send");
  o.Set("byteLen", wc.byte_len);
  o.Set("qpn", wc.qp_num);
  return o;
}

// The busy-poll loop on a native (libuv pool) thread: spins on ibv_poll_cq until at least one completion
// arrives or `timeoutUs` passes, then hands the batch to JavaScript as one resolved promise. The caller keeps
// at most one of these in flight per completion queue and does not poll that queue meanwhile.
class PollWorker : public Napi::AsyncWorker {
 public:
  PollWorker(Napi::Env env, struct ibv_cq* cq, int max, int64_t timeoutUs)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), cq_(cq), max_(max), timeoutUs_(timeoutUs) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      int n = ibv_poll_cq(cq_, max_, wc_);
      if (n < 0) {
        SetError("EIO: ibv_poll_cq failed");
        return;
      }
      if (n > 0) {
        n_ = n;
        return;
      }
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
      if (us >= timeoutUs_) return;
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Array out = Napi::Array::New(env, static_cast<size_t>(n_));
    for (int i = 0; i < n_; i++) out.Set(static_cast<uint32_t>(i), WcToObject(env, wc_[i]));
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  struct ibv_cq* cq_;
  int max_;
  int64_t timeoutUs_;
  int n_ = 0;
  struct ibv_wc wc_[64];
};

// pollCqAsync(cq, max, timeoutUs) -> Promise<WorkCompletion[]> (empty on timeout)
Napi::Value PollCqAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct ibv_cq* cq = static_cast<struct ibv_cq*>(Get(env, info[0], Kind::Cq, "completion queue").ptr);
  int max = info[1].As<Napi::Number>().Int32Value();
  if (max < 1) max = 1;
  if (max > 64) max = 64;
  int64_t timeoutUs = info[2].As<Napi::Number>().Int64Value();
  auto* worker = new PollWorker(env, cq, max, timeoutUs);
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

#else  // no verbs.h at build time: the addon loads and says why it cannot help.

Napi::Value LibraryStatus(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("kind", kKind);
  o.Set("headers", false);
  o.Set("loaded", false);
  o.Set("library", "");
  o.Set("error", "addon built without infiniband/verbs.h (install libibverbs-dev, or the macOS 26.2 SDK)");
  return o;
}

#endif

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("libraryStatus", Napi::Function::New(env, LibraryStatus));
#if ORCHARD_HAVE_VERBS
  exports.Set("listDevices", Napi::Function::New(env, ListDevices));
  exports.Set("openDevice", Napi::Function::New(env, OpenDevice));
  exports.Set("closeDevice", Napi::Function::New(env, CloseDevice));
  exports.Set("queryPort", Napi::Function::New(env, QueryPort));
  exports.Set("queryGid", Napi::Function::New(env, QueryGid));
  exports.Set("allocPd", Napi::Function::New(env, AllocPd));
  exports.Set("deallocPd", Napi::Function::New(env, DeallocPd));
  exports.Set("allocSlab", Napi::Function::New(env, AllocSlab));
  exports.Set("regMr", Napi::Function::New(env, RegMr));
  exports.Set("deregMr", Napi::Function::New(env, DeregMr));
  exports.Set("createCq", Napi::Function::New(env, CreateCq));
  exports.Set("destroyCq", Napi::Function::New(env, DestroyCq));
  exports.Set("createQp", Napi::Function::New(env, CreateQp));
  exports.Set("destroyQp", Napi::Function::New(env, DestroyQp));
  exports.Set("modifyQpInit", Napi::Function::New(env, ModifyQpInit));
  exports.Set("modifyQpRtr", Napi::Function::New(env, ModifyQpRtr));
  exports.Set("modifyQpRts", Napi::Function::New(env, ModifyQpRts));
  exports.Set("postSend", Napi::Function::New(env, PostSend));
  exports.Set("postRecv", Napi::Function::New(env, PostRecv));
  exports.Set("pollCq", Napi::Function::New(env, PollCq));
  exports.Set("pollCqAsync", Napi::Function::New(env, PollCqAsync));
#endif
  return exports;
}

NODE_API_MODULE(orchard_verbs, Init)
