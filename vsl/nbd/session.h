// One NBD connection: the fixed-newstyle handshake, then transmission.
//
// Transmission, polled (the default where it can be: a plain socket, an export with one
// engine on a real clock, BlockExport::engine): the export's engine's own thread reads
// the connection (RealClock::FdSource), runs its requests and sends the replies its run
// completed in one gather write, so a request meets no thread but the engine's and a
// burst of replies costs the client one wake-up. The engine never blocks on the socket:
// a request read in part waits for the rest on the next turn, and replies the socket
// does not take go to the writer thread (below). The caller of Run only waits for the
// end. With several connections to one LUN, one thread serves them all, the way the
// LUN's one engine serves everything else.
//
// Transmission, threaded (TLS, volumes, memory transports, or polled off): the caller
// of Run reads requests, checks them and hands them to the export (which runs them on its
// LUN's engine); a completion sends its reply itself when the socket takes it at once,
// else queues it for the connection's writer thread, so replies go out in completion
// order, not request order, and an engine never waits on a socket. A request the export
// completes on the reader's own thread (it borrowed an idle engine, Engine::RunHere, or
// failed the checks) is answered by the reader itself once the export call has returned:
// no hand-off at all at queue depth 1. The two threads' socket writes are serialised.
//
// Either way the connection takes no new request while max_inflight requests or
// max_inflight_bytes of buffers are outstanding (polled: the engine stops polling it).
//
// Bad input: a bad magic ends the connection; a request outside the export, misaligned,
// too long, with unknown flags or of an unknown type gets its error (EINVAL, EOVERFLOW,
// EPERM, ENOTSUP) and the connection goes on; a write whose payload exceeds the maximum
// is answered and the connection closed (its payload cannot be trusted to resynchronise);
// an end of stream mid-request closes the connection after every accepted request is
// answered. Nothing of one connection affects another, and no request is applied twice
// or in part because of a protocol error.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/free_list.h"
#include "vsl/core/spin.h"
#include "vsl/nbd/export.h"
#include "vsl/nbd/transport.h"

namespace vsl::nbd {

struct SessionOptions {
  std::shared_ptr<TlsContext> tls;  // null or mode off: STARTTLS unsupported
  bool read_only = false;           // every export read-only
  bool write_through = false;       // every write acknowledged only once on flash (FUA)
  uint32_t max_payload = 32u << 20; // advertised maximum block size
  uint32_t max_inflight = 256;
  uint64_t max_inflight_bytes = 128ull << 20;
  int handshake_timeout_s = 10;
  uint32_t max_options = 1024;      // options before GO; more ends the connection
  bool polled = true;               // let the export's engine read the connection (above)
};

struct SessionStats {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> replies_direct{0};  // sent by the completing thread (SendNow)
  std::atomic<uint64_t> replies_split{0};   // replies the socket took in part (the rest: the writer)
  std::atomic<uint64_t> polled_batches{0};  // gather writes of replies by a polling engine
  std::atomic<uint64_t> polled_pauses{0};   // times the engine stopped reading: admission full
};

class Session {
 public:
  Session(std::unique_ptr<Transport> t, ExportCatalog& catalog, SessionOptions opts, std::string peer);
  ~Session();
  // Serves the connection until it ends; every accepted request is answered (or its
  // reply dropped because the peer left) before Run returns.
  void Run();
  // From another thread: ends the connection (Run returns once its requests are done).
  void Stop();
  bool finished() const { return finished_.load(); }
  const std::string& peer() const { return peer_; }
  const SessionStats& stats() const { return stats_; }

 private:
  struct Request;
  bool Handshake();
  bool SendOptReply(uint32_t opt, uint32_t type, const uint8_t* data, std::size_t len);
  bool SendOptError(uint32_t opt, uint32_t type, const std::string& msg);
  bool HandleInfo(uint32_t opt, const std::vector<uint8_t>& data);
  bool HandleExportName(const std::vector<uint8_t>& data);
  bool HandleMetaContext(uint32_t opt, const std::vector<uint8_t>& data);
  uint16_t TransmissionFlags() const;
  void Transmission();
  // A request from its header (kRequestBytes), counted; null when the connection ends
  // there (a bad magic, or NBD_CMD_DISC).
  Request* NewRequest(const uint8_t* h);
  // Checks and dispatches one request; false ends the connection.
  bool Dispatch(Request* r);
  // The checks and the export call, for a request admitted with its payload in; false
  // ends the connection.
  bool Execute(Request* r);
  // What the admission charges for `r` (its buffer; nothing for an oversize one).
  void Charge(Request* r) const;
  // Fails an admitted write whose payload exceeds the maximum (true: the connection ends).
  bool FailOversizeWrite(Request* r);

  // Polled transmission (RealClock::FdSource; every call on the engine's thread but the
  // session thread's own, which waits for the end, then takes what is left).
  class Source;
  // True when the connection was served polled (false: the engine could not take it).
  bool TransmissionPolled();
  // The engine's: reads and dispatches what the socket has; true when any was taken.
  bool TakePolled();
  // The engine's, after its run: sends the replies the run completed.
  void FlushPolled();
  // The connection ends (any reason): the engine stops reading it.
  void EndPolled();
  // Releases `n` admissions of `bytes` (mu_ held); true when the engine must be woken
  // (the polled reader was waiting for room).
  bool ReleaseLocked(uint32_t n, uint64_t bytes);
  void Complete(Request* r, Status s);
  // An engine's completion sends its reply itself when it can without waiting: nothing
  // queued for the writer's socket lock, the socket taking bytes now. Saves the writer's
  // wake-up (tens of microseconds on a VM, more than a zero-time request). Bytes the
  // socket did not take go to unsent_, sent by the next writer of the socket before
  // anything else, so an engine never waits on a slow peer. True when the reply has left
  // (whole, or in part with the rest in unsent_) and its admission is released: the
  // session is not touched after. False: nothing was sent; queue it for the writer.
  bool SendNow(Request* r);
  // Keeps in unsent_ what of `iov` lies past its first `sent` bytes. send_mu_ held.
  void KeepUnsent(const std::vector<iovec>& iov, std::size_t sent);
  // Sends unsent_ (blocking). send_mu_ held.
  void FlushUnsent();
  void Fail(Request* r, uint32_t error, std::string msg);
  void WriterLoop();
  // Sends the replies in `batch` (gather writes, send_mu_ held) and releases their
  // admission; empties `batch`.
  void SendReplies(std::deque<Request*>& batch, std::vector<iovec>& iov);
  // Appends `r`'s reply (headers built in `r`) to a gather list.
  void AppendReply(Request* r, std::vector<iovec>* iov);
  // Requests are reused (free_requests_, under mu_, at most max_inflight of them) with
  // their buffers up to kKeptBufferBytes, so a request of an ordinary size allocates
  // nothing and an idle session keeps at most max_inflight * 128 KiB (32 MiB by default).
  // Given back with free_requests_.Give, mu_ held.
  static constexpr uint64_t kKeptBufferBytes = 128 << 10;
  Request* TakeRequest();

  std::unique_ptr<Transport> t_;
  ExportCatalog& catalog_;
  const SessionOptions opts_;
  const std::string peer_;
  std::shared_ptr<BlockExport> exp_;
  std::string export_name_;
  bool no_zeroes_ = false;
  bool fixed_ = false;
  bool structured_ = false;
  bool allocation_context_ = false;  // base:allocation selected (SET_META_CONTEXT)
  bool read_only_ = false;

  std::mutex mu_;  // the reply queue and the in-flight counts
  std::condition_variable writer_cv_;  // replies queued (or stop), for the writer
  std::condition_variable room_cv_;    // requests answered, for the reader
  bool writer_waiting_ = false;        // notified only when someone waits
  bool reader_waiting_ = false;
  std::deque<Request*> replies_;
  FreeList<Request> free_requests_;  // (mu_)
  std::mutex send_mu_;                 // one writer of the socket at a time
  std::vector<uint8_t> unsent_;        // the tail of a reply SendNow sent in part (send_mu_)
  std::vector<iovec> direct_iov_;      // SendNow's gather list (send_mu_)
  bool flush_unsent_ = false;          // unsent_ has bytes for the writer (mu_)
  std::thread::id reader_id_;          // the thread running Transmission
  std::deque<Request*> local_replies_; // completed on the reader's thread (reader only)
  std::vector<iovec> local_iov_;
  // Between requests the reader polls the stream a little before it sleeps in a read:
  // waking a sleeping thread costs tens of microseconds on a VM, more than a zero-time
  // request, and at queue depth 1 the next request follows its reply within a few.
  AdaptiveSpin idle_spin_;
  bool inline_last_ = true;  // the last request was answered on the reader's thread
  uint32_t inflight_ = 0;
  uint64_t inflight_bytes_ = 0;
  bool writer_stop_ = false;
  std::thread writer_;
  // Polled transmission's state. The engine's thread alone (until the session thread has
  // removed the source): the request being read, and how much of it.
  RealClock* poll_clock_ = nullptr;
  std::unique_ptr<Source> source_;
  uint8_t poll_head_[28];
  std::size_t poll_head_got_ = 0;
  Request* poll_cur_ = nullptr;     // header read; admission, payload or both to come
  bool poll_cur_admitted_ = false;
  uint64_t poll_payload_got_ = 0;
  std::atomic<bool> poll_ended_{false};
  bool poll_end_seen_ = false;        // (mu_) for the session thread's wait
  std::atomic<bool> poll_paused_{false};  // admission full (set and cleared under mu_)
  // Replies completed on the engine's thread, sent by its FlushPolled. Once the source is
  // removed (poll_detached_), the session thread sends what is left and later replies go
  // the threaded way.
  std::mutex poll_mu_;
  std::deque<Request*> poll_replies_;   // (poll_mu_)
  bool poll_detached_ = false;          // (poll_mu_)
  std::deque<Request*> poll_batch_;     // the engine's: the batch being sent
  std::vector<iovec> poll_iov_;
  std::atomic<bool> finished_{false};
  std::atomic<bool> stopping_{false};
  SessionStats stats_;
};

// Maps a Status from an export to the protocol's error value.
uint32_t ErrorFor(const Status& s);

}  // namespace vsl::nbd
