// grpc_echo.cc - grpc-echo: the gRPC unary echo baseline of issue 15.
//
//   grpc-echo server [--listen ADDR] [--threads N]
//   grpc-echo lat  [--size B] [--iters N] [--warmup N] [--json]
//   grpc-echo rate [--size B] [--outstanding K] [--iters N] [--warmup N]
//                  [--threads T] [--json]
//   client options: --connect ADDR [--server-pid PID] (a running server;
//   default: spawn one), --server-threads N
//
// lat: closed loop, one call outstanding; p50/p99/avg of the call round
// trip over --iters calls after --warmup. rate: --outstanding calls kept
// in flight, spread over --threads client threads (one connection each);
// calls per second, and calls per second per core, where core seconds are
// the user + system CPU of client and server together over the measured
// calls. Without --connect the client spawns the server (this program) on
// 127.0.0.1, so one command measures both ends.
//
// Output: a readable summary, or with --json one JSON object per
// measurement: test ("rpc-lat" | "rpc-rate"), impl "grpc", transport "tcp",
// size, iters, outstanding, p50_us, p99_us, avg_us, calls_per_s,
// calls_per_s_per_core, cpu_s (client + server), client_cpu_s,
// server_cpu_s (null when unknown), errors, client ("blocking" | "cq"),
// threads, server ("cq"), server_threads. Latencies are call round trips.
//
// Which gRPC API, and why. We tried the three server APIs of gRPC 1.51
// (sync; callback; async, with completion queues polled by our threads)
// with blocking, callback and completion-queue clients, 64 B, client and
// server on the 2 cores of this host (taskset -c 0,1), 9 interleaved
// repetitions on a loaded host (load average 13-25), medians:
//   server      lat p50, blocking client    rate calls/s/core, K = 32
//   sync        82 us (2 threads), 271 (1)  11.0k-12.2k (2 threads), 3.0k-3.4k (1)
//   callback    69-75 us                    20.2k-23.3k
//   async (CQ)  53 us (1 thread), 97 (2)    22.2k-24.5k (1 thread), 16.2k-17.7k (2)
// The sync server hands each call from a polling thread to a handler
// thread and back; the completion-queue server answers on the thread that
// polled the call in; the callback server does too, but on gRPC's own
// executor threads, which we cannot size. We keep the completion-queue
// server, the fastest here and what gRPC's own benchmarks run. On the
// client side a blocking call is the quickest way to have one call
// outstanding (the callback client's p50 was about twice as high: every
// completion hops to an executor thread), and completion queues keep K
// calls in flight without K threads, so lat uses the blocking stub and
// rate the completion-queue one. Server and client default to half the
// cores each (1 thread each here), because one command runs both on this
// host: 1 server thread measured faster than 2 above.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "echo.grpc.pb.h"
#include "grpc_common.h"

using be::bench::Echo;
using be::bench::EchoMsg;

namespace {

const char *kUsage =
	"usage: grpc-echo server|lat|rate [options]\n"
	GB_SERVER_USAGE
	"  lat:    --size B (64) --iters N (20000) --warmup N (2000)\n"
	"  rate:   --size B (64) --outstanding K (32) --iters N (200000) --warmup N (20000)\n"
	"          --threads T (client threads; half the cores, at most K)\n"
	"  both:   --server-threads N --json\n"
	"          --connect ADDR [--server-pid PID]  (default: spawn the server)\n";

// ---- servers ------------------------------------------------------------

int server_main(int argc, char **argv)
{
	sigset_t stop = gb::stop_signals_block();
	gb::Opts o("grpc-echo server", argc, argv, 2);
	gb::ServerOpts so;
	grpc::ServerBuilder b;
	Echo::AsyncService svc;
	int port = 0;

	while (o.more()) {
		if (so.option(o))
			continue;
		o.unknown();
	}
	so.check(o);
	gb::configure_server(b, so.listen, &port);
	b.RegisterService(&svc);
	// The reply takes the request's bytes: a move, not a copy.
	return gb::serve_unary<Echo::AsyncService, EchoMsg, EchoMsg>(
		"grpc-echo server", b, &port, (unsigned)so.threads, so.ready(), stop, &svc,
		&Echo::AsyncService::RequestCall, [](EchoMsg &req, EchoMsg *resp) {
			resp->mutable_data()->swap(*req.mutable_data());
			return grpc::Status::OK;
		});
}

// ---- clients ------------------------------------------------------------

// The calls of one phase (warm-up or measured) on one thread.
struct Phase {
	gb::Hist hist;
	uint64_t errors = 0;
	std::string first_error;

	void record(uint64_t t0, const grpc::Status &st, const EchoMsg &resp, const EchoMsg &req)
	{
		lg_hist_add(hist.h, gb::now_ns() - t0);
		if (st.ok() && resp.data() == req.data())
			return;
		if (!errors++)
			first_error = st.ok() ? "the echo differs from the request" :
				"status " + std::to_string(st.error_code()) + " " + st.error_message();
	}
	void merge(const Phase &o)
	{
		lg_hist_merge(hist.h, o.hist.h);
		if (o.errors && !errors)
			first_error = o.first_error;
		errors += o.errors;
	}
};

// lat: blocking calls, one at a time, on the caller's thread.
void run_blocking(Echo::Stub *stub, const EchoMsg &req, uint64_t calls, Phase *ph)
{
	EchoMsg resp;

	for (uint64_t i = 0; i < calls; i++) {
		grpc::ClientContext ctx;
		uint64_t t0 = gb::now_ns();
		grpc::Status st = stub->Call(&ctx, req, &resp);

		ph->record(t0, st, resp, req);
	}
}

// rate, one client thread: @calls calls on one stub, @window of them in
// flight, the thread polling its own completion queue.
void run_cq(Echo::Stub *stub, const EchoMsg &req, uint64_t calls, uint64_t window, Phase *ph)
{
	struct Slot {
		std::unique_ptr<grpc::ClientContext> ctx;
		std::unique_ptr<grpc::ClientAsyncResponseReader<EchoMsg>> rd;
		EchoMsg resp;
		grpc::Status st;
		uint64_t t0;
	};
	grpc::CompletionQueue cq;
	std::vector<Slot> slots(std::min(window, calls));
	uint64_t issued = 0, done = 0;
	void *tag;
	bool ok;
	auto start = [&](Slot *s) {
		s->ctx.reset(new grpc::ClientContext());
		s->t0 = gb::now_ns();
		s->rd = stub->AsyncCall(s->ctx.get(), req, &cq);
		s->rd->Finish(&s->resp, &s->st, s);
		issued++;
	};

	for (Slot &s : slots)
		start(&s);
	while (done < issued && cq.Next(&tag, &ok)) {
		Slot *s = static_cast<Slot *>(tag);

		ph->record(s->t0, ok ? s->st : grpc::Status(grpc::StatusCode::INTERNAL, "cq"),
			   s->resp, req);
		done++;
		if (issued < calls)
			start(s);
	}
	cq.Shutdown();
	while (cq.Next(&tag, &ok))
		;
}

// rate: @calls calls, @window in flight, split over the client threads
// (one stub, so one connection, each).
void run_rate(std::vector<std::unique_ptr<Echo::Stub>> &stubs, const EchoMsg &req,
	      uint64_t calls, uint64_t window, Phase *ph)
{
	uint64_t n = stubs.size();
	std::vector<std::unique_ptr<Phase>> parts;
	std::vector<std::thread> th;

	for (uint64_t t = 0; t < n; t++) {
		uint64_t mine = calls / n + (t < calls % n), win = window / n + (t < window % n);

		parts.emplace_back(new Phase());
		if (mine && win)
			th.emplace_back(run_cq, stubs[t].get(), std::cref(req), mine, win,
					parts[t].get());
	}
	for (auto &x : th)
		x.join();
	for (auto &p : parts)
		ph->merge(*p);
}

int client_main(int argc, char **argv, bool rate)
{
	const char *prog = rate ? "grpc-echo rate" : "grpc-echo lat";
	gb::Opts o(prog, argc, argv, 2);
	uint64_t size = 64, iters = rate ? 200000 : 20000, warmup = rate ? 20000 : 2000;
	uint64_t outstanding = rate ? 32 : 1, threads = 0;
	bool json = false;
	gb::Peer peer;

	while (o.more()) {
		if (o.flag("--json")) {
			json = true;
			continue;
		}
		if (o.value("--size", &size) || o.value("--iters", &iters) ||
		    o.value("--warmup", &warmup) || peer.option(o) ||
		    (rate && (o.value("--outstanding", &outstanding) ||
			      o.value("--threads", &threads))))
			continue;
		o.unknown();
	}
	if (!iters || !outstanding)
		o.die("--iters and --outstanding must be > 0");
	if (size > (64u << 20))
		o.die("--size must be <= 64M");
	if (!threads)
		threads = gb::half_cores();
	threads = rate ? std::min(threads, outstanding) : 1;

	if (!peer.start(prog, {}))
		return 1;

	EchoMsg req;
	std::vector<std::unique_ptr<Echo::Stub>> stubs;
	req.set_data(std::string(size, 'e'));
	for (uint64_t t = 0; t < threads; t++)
		stubs.push_back(Echo::NewStub(gb::make_channel(peer.addr(), (int)t)));
	auto phase = [&](uint64_t calls, Phase *ph) {
		if (rate)
			run_rate(stubs, req, calls, outstanding, ph);
		else
			run_blocking(stubs[0].get(), req, calls, ph);
	};

	Phase warm, ph;
	phase(warmup, &warm);
	peer.cpu_begin();
	uint64_t t0 = gb::now_ns();
	phase(iters, &ph);
	double secs = (double)(gb::now_ns() - t0) / 1e9;
	peer.cpu_end();
	stubs.clear();
	int srv_rc = peer.stop(prog);

	double cpu = peer.cpu_s(), cps = (double)iters / secs;
	double per_core = cpu > 0 ? (double)iters / cpu : 0;
	const char *client = rate ? "cq" : "blocking";
	std::string srv_cpu = peer.server_cpu_json();
	if (json) {
		printf("{\"test\":\"%s\",\"impl\":\"grpc\",\"transport\":\"tcp\",\"size\":%" PRIu64
		       ",\"iters\":%" PRIu64 ",\"outstanding\":%" PRIu64 ",\"p50_us\":%.3f"
		       ",\"p99_us\":%.3f,\"avg_us\":%.3f,\"calls_per_s\":%.1f"
		       ",\"calls_per_s_per_core\":%.1f,\"cpu_s\":%.4f,\"client_cpu_s\":%.4f"
		       ",\"server_cpu_s\":%s,\"errors\":%" PRIu64 ",\"client\":\"%s\""
		       ",\"threads\":%" PRIu64 ",\"server\":\"cq\",\"server_threads\":%" PRIu64
		       "}\n",
		       rate ? "rpc-rate" : "rpc-lat", size, iters, outstanding, ph.hist.us(0.5),
		       ph.hist.us(0.99), ph.hist.avg_us(), cps, per_core, cpu, peer.client_cpu_s,
		       srv_cpu.c_str(), warm.errors + ph.errors, client, threads, peer.threads());
	} else {
		printf("%s: %" PRIu64 " B, %" PRIu64 " calls, %" PRIu64 " outstanding; %s client x%"
		       PRIu64 ", completion-queue server x%" PRIu64 "\n"
		       "  round trip us: p50 %.2f  p99 %.2f  avg %.2f\n"
		       "  %.0f calls/s, %.0f calls/s per core (CPU %.3f s: client %.3f, server %s)\n",
		       prog, size, iters, outstanding, client, threads, peer.threads(),
		       ph.hist.us(0.5), ph.hist.us(0.99), ph.hist.avg_us(), cps, per_core, cpu,
		       peer.client_cpu_s, srv_cpu == "null" ? "unknown" : srv_cpu.c_str());
	}
	if (warm.errors + ph.errors) {
		fprintf(stderr, "%s: %" PRIu64 " calls failed, first: %s\n", prog,
			warm.errors + ph.errors, (warm.errors ? warm : ph).first_error.c_str());
		return 1;
	}
	return srv_rc;
}

} // namespace

int main(int argc, char **argv)
{
	return gb::run_mode("grpc-echo", kUsage, argc, argv,
			    { { "server", server_main },
			      { "lat", [](int c, char **v) { return client_main(c, v, false); } },
			      { "rate", [](int c, char **v) { return client_main(c, v, true); } } });
}
