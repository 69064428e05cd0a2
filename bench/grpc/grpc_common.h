// grpc_common.h - what the gRPC baselines (grpc-echo, grpc-fetch) share:
// channel and server settings, the server child process a client spawns so
// that one command measures both ends, option parsing, and statistics.
//
// The settings are those a performance-minded team would deploy with
// (reasons in grpc_common.cc); both programs use them unchanged, so the
// echo and the fetch measure the same gRPC.
#ifndef BE_BENCH_GRPC_COMMON_H
#define BE_BENCH_GRPC_COMMON_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "loadgen.h"

namespace gb {

inline uint64_t now_ns() { return lg_now_ns(); } // CLOCK_MONOTONIC

// Half the online cores, at least 1: the default thread count of a server
// and of a client, which share this host when one command runs both.
unsigned half_cores();

// ---- settings -------------------------------------------------------------

// A channel to @addr ("127.0.0.1:port"). Channels made with different
// @conn numbers use different TCP connections (channels whose arguments
// differ never share a subchannel);
// the same number shares one.
std::shared_ptr<grpc::Channel> make_channel(const std::string &addr, int conn);

// The common server settings (message size limits) and a listening port
// on @listen, whose number lands in *@port once the server starts.
void configure_server(grpc::ServerBuilder &b, const std::string &listen, int *port);

// ---- completion-queue servers --------------------------------------------

// One call of a completion-queue server; its address is its tag. proceed()
// runs on the queue's thread with each event of the call; @ok false means
// the server is shutting down (the call deletes itself).
class CqCall {
 public:
	virtual ~CqCall() = default;
	virtual void proceed(bool ok) = 0;
};

// serve_cq() - the life of a completion-queue server. @b is configured
// (configure_server(), which also received @port) with its service
// registered; this adds @threads queues, starts the server, lets @post
// request kCqPosted calls on each queue (one new CqCall each), polls each
// queue on its own thread, announces the port on @ready_fd (-1: prints it),
// waits for SIGTERM or SIGINT (@stop, see below) and shuts down. Returns
// the exit status: 0, or 1 if it could not listen.
const int kCqPosted = 64;
int serve_cq(const char *prog, grpc::ServerBuilder &b, const int *port, unsigned threads,
	     int ready_fd, const sigset_t &stop,
	     const std::function<void(grpc::ServerCompletionQueue *)> &post);

// A unary call of a completion-queue server: requested with @request (the
// generated AsyncService::RequestMethod) on @cq, answered with what
// @handler returns (it borrows the request and fills the reply), freed
// once the reply is sent. Each call requests its successor as it starts.
template <class Svc, class Req, class Resp>
class UnaryCall final : public CqCall {
 public:
	using Request = void (Svc::*)(grpc::ServerContext *, Req *,
				      grpc::ServerAsyncResponseWriter<Resp> *,
				      grpc::CompletionQueue *, grpc::ServerCompletionQueue *, void *);
	using Handler = std::function<grpc::Status(Req &, Resp *)>;

	UnaryCall(Svc *svc, Request request, grpc::ServerCompletionQueue *cq,
		  const Handler *handler)
		: svc_(svc), request_(request), cq_(cq), handler_(handler), writer_(&ctx_)
	{
		(svc_->*request_)(&ctx_, &req_, &writer_, cq_, cq_, this);
	}
	void proceed(bool ok) override
	{
		if (answered_ || !ok) { // finished, or the server is shutting down
			delete this;
			return;
		}
		new UnaryCall(svc_, request_, cq_, handler_);
		grpc::Status st = (*handler_)(req_, &resp_);
		answered_ = true;
		if (st.ok())
			writer_.Finish(resp_, st, this);
		else
			writer_.FinishWithError(st, this);
	}

 private:
	Svc *svc_;
	Request request_;
	grpc::ServerCompletionQueue *cq_;
	const Handler *handler_;
	grpc::ServerContext ctx_;
	Req req_;
	Resp resp_;
	grpc::ServerAsyncResponseWriter<Resp> writer_;
	bool answered_ = false;
};

// serve_unary() - serve_cq() for a service of one unary method: @request
// is &AsyncService::RequestMethod, @handler answers each call.
template <class Svc, class Req, class Resp>
int serve_unary(const char *prog, grpc::ServerBuilder &b, const int *port, unsigned threads,
		int ready_fd, const sigset_t &stop, Svc *svc,
		typename UnaryCall<Svc, Req, Resp>::Request request,
		const typename UnaryCall<Svc, Req, Resp>::Handler &handler)
{
	return serve_cq(prog, b, port, threads, ready_fd, stop,
			[&](grpc::ServerCompletionQueue *cq) {
				new UnaryCall<Svc, Req, Resp>(svc, request, cq, &handler);
			});
}

// ---- the server process --------------------------------------------------

// Server side. Call stop_signals_block() first thing in main, before any
// thread exists, so every gRPC thread inherits the mask and SIGTERM /
// SIGINT reach stop_signal_wait() only. announce() writes "PORT\n" on
// @ready_fd (if >= 0) and closes it.
sigset_t stop_signals_block();
void stop_signal_wait(const sigset_t &set);
int announce(int ready_fd, int port);

// Client side, by hand: run this program (/proc/self/exe) with @args plus
// "--ready-fd N" as a child that dies with us, and read the port it
// announced (within 30 s). Returns 0 or -errno (-ECHILD: it exited first).
struct Child {
	pid_t pid = 0;
	int port = 0;
};
int child_spawn(const std::vector<std::string> &args, Child *c);
// SIGTERM, then SIGKILL after 10 s; returns the exit status (0 clean).
int child_stop(Child *c);

// ---- options -----------------------------------------------------------

// A tiny argv walker: opts.flag("--json") / opts.value("--size", &v).
// Unknown options and bad values exit(2) with a message naming them: these
// are tools, not the library.
class Opts {
 public:
	Opts(const char *prog, int argc, char **argv, int first);
	bool more() const { return i_ < argc_; }
	const char *cur() const { return argv_[i_]; }
	bool flag(const char *name);
	bool value(const char *name, std::string *out);
	bool value(const char *name, uint64_t *out); // K/M/G suffixes
	bool value(const char *name, double *out);
	[[noreturn]] void unknown();
	[[noreturn]] void die(const std::string &msg);

 private:
	// value() of a number: parse_number() on the string, die() if it is bad.
	template <typename T> bool number(const char *name, T *out);

	const char *prog_;
	int argc_;
	char **argv_;
	int i_;
};

// ---- a server's options ----------------------------------------------------

// The options of every server mode: --listen ADDR, --threads N (its
// completion-queue threads) and --ready-fd FD (where the client that
// spawned it, Peer::start(), learns the port). GB_SERVER_USAGE is their
// line of a program's usage.
#define GB_SERVER_USAGE "  server: --listen ADDR (127.0.0.1:0) --threads N (half the cores)\n"
struct ServerOpts {
	std::string listen = "127.0.0.1:0";
	uint64_t threads = half_cores(), ready_fd = UINT64_MAX;

	// Takes the option at @o's position if it is one of these.
	bool option(Opts &o);
	// Dies (Opts::die()) unless --threads is 1..1024.
	void check(Opts &o) const;
	// serve_cq()'s @ready_fd: -1 without --ready-fd.
	int ready() const { return ready_fd == UINT64_MAX ? -1 : (int)ready_fd; }
};

// ---- the server end of a client run --------------------------------------

// The server end of a client run: a child spawned by the client (default)
// or a running server (--connect). Also brackets the measured span to
// take the CPU time of both ends.
class Peer {
 public:
	// Takes the client options of the server end at @o's position:
	// --connect ADDR, --server-pid PID (its CPU is then counted),
	// --server-threads N. True if the option was one of these.
	bool option(Opts &o);
	uint64_t threads() const { return threads_; }
	const std::string &addr() const { return addr_; }

	// Unless --connect was given, spawns "server --threads N @args..." and
	// waits for its port. False, with a message naming @prog, on failure.
	bool start(const char *prog, const std::vector<std::string> &args);

	// CPU seconds of the measured span, both ends: call cpu_begin() and
	// cpu_end() around it. server_cpu_s is < 0 when unknown (--connect
	// without --server-pid); cpu_s() is then the client's alone.
	void cpu_begin();
	void cpu_end();
	double client_cpu_s = 0, server_cpu_s = -1;
	double cpu_s() const { return client_cpu_s + (server_cpu_s > 0 ? server_cpu_s : 0); }
	std::string server_cpu_json() const; // "%.4f", or null when unknown

	// Stops a spawned server. 0, or 1 (with a message) if it exited badly.
	int stop(const char *prog);
	~Peer() { child_stop(&child_); }

 private:
	std::string addr_;
	uint64_t threads_ = half_cores(), pid_ = 0;
	double c0_ = 0, s0_ = -1;
	Child child_;
};

// main() of a program with modes: runs the mode named by argv[1], or
// prints @usage (to stdout for help, else to stderr with status 2).
struct Mode {
	const char *name;
	int (*run)(int argc, char **argv); // argv[1] is the mode
};
int run_mode(const char *prog, const char *usage, int argc, char **argv,
	     std::initializer_list<Mode> modes);

// ---- statistics --------------------------------------------------------

// A histogram (lg_hist, values in ns) owned by one thread.
struct Hist {
	Hist() : h(lg_hist_create()) { if (!h) throw std::bad_alloc(); }
	~Hist() { free(h); }
	Hist(const Hist &) = delete;
	Hist &operator=(const Hist &) = delete;
	double us(double q) const { return (double)lg_hist_pct(h, q) / 1e3; }
	double avg_us() const { return lg_hist_avg(h) / 1e3; }
	struct lg_hist *h;
};

} // namespace gb

#endif // BE_BENCH_GRPC_COMMON_H
