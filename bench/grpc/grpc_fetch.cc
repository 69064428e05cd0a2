// grpc_fetch.cc - grpc-fetch: the parameter-server fetch served by gRPC,
// the baseline "what a team would otherwise deploy" of issue 16 section 4.
//
//   grpc-fetch server [--listen ADDR] [--threads N] [--tables T] [--rows R] [--dim D]
//   grpc-fetch ranker [--qps Q] [--keys K] [--alpha A] [--seconds S] [--warmup S]
//                     [--deadline-ms D] [--verify all|sample|none] [--pool N]
//                     [--threads N] [--max-outstanding N] [--seed N] [--json]
//                     [--tables T] [--rows R] [--dim D] [--server-threads N]
//                     [--connect ADDR [--server-pid PID]] [--cdf FILE]
//
// The server holds --tables tables of --rows rows of --dim float32 each, in
// memory, filled with lg_row_fill() (bench/common/loadgen.h: the formula
// every implementation serves, so any client can check any row), and
// answers Fetch(table, keys) with the rows in the request's order, packed
// into one bytes field (fetch.proto).
//
// The ranker is an open-loop load like a production ranker's: queries
// arrive as a Poisson process at --qps; query i fetches --keys keys of
// table i mod --tables, drawn Zipf(--alpha) over the rows (rank r is key
// r, so key 0 is the hottest). Per query, as a parameter-server client
// library would: dedupe the keys, one Fetch call with a deadline, then
// gather the rows into the query's output array in the query's key order.
// Latency runs from the scheduled arrival to the end of the gather, so a
// sender or server that falls behind shows up as latency (no coordinated
// omission); failed fetches count at their failure time (a fetch past its
// deadline counts at the deadline). The keys are drawn before the run (a
// pool of --pool queries, reused in turn), so drawing them costs neither
// time nor CPU inside the measurement; dedupe and gather do count. CPU per
// fetch is the user + system CPU of client and server over the measured
// seconds divided by the fetches. --verify checks the gathered rows
// against lg_row_check() after the latency is taken (all: every row;
// sample: the query's first; none), though its CPU does count.
//
// Output: a readable summary, or with --json one line with the fields
// experiment "fetch", impl "grpc", transport "tcp", qps, achieved_qps,
// keys, unique_keys_avg, alpha, tables, rows, dim, deadline_ms, queries
// (fetches measured), errors (failed fetches, timeouts included), timeouts,
// bad_rows, avg_us, p50_us, p90_us, p99_us, p999_us, max_us,
// send_lag_p50_us and send_lag_p99_us (how late the sender sent, part of
// the latency), cpu_us_per_fetch, cpu_s, client_cpu_s, server_cpu_s (null
// when unknown), verify, threads.
// Exit status 1 if a row was wrong or a fetch failed other than by its
// deadline (deadline misses are a result, not a failure), 2 on bad usage.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "fetch.grpc.pb.h"
#include "grpc_common.h"

using be::bench::FetchReply;
using be::bench::FetchRequest;
using be::bench::Ps;

namespace {

const char *kUsage =
	"usage: grpc-fetch server|ranker [options]\n"
	GB_SERVER_USAGE
	"          --tables T (4) --rows R (1M) --dim D (32)\n"
	"  ranker: --qps Q (1000) --keys K (1024) --alpha A (1.09) --seconds S (10)\n"
	"          --warmup S (1) --deadline-ms D (30; 0: none) --verify all|sample|none\n"
	"          (sample) --pool N (queries drawn up front) --threads N (completion\n"
	"          threads, 1) --max-outstanding N (1000) --seed N --json\n"
	"          --tables/--rows/--dim as the server's; --server-threads N\n"
	"          --connect ADDR [--server-pid PID]  (default: spawn the server)\n"
	"          --cdf FILE (the latency CDF, lines \"latency_us fraction\")\n";

// ---- server -------------------------------------------------------------

struct Tables {
	uint32_t dim = 32;
	uint64_t rows = 1 << 20;
	std::vector<std::vector<float>> t;

	void fill(uint32_t ntables)
	{
		t.resize(ntables);
		for (uint32_t i = 0; i < ntables; i++) {
			t[i].resize(rows * dim);
			for (uint64_t k = 0; k < rows; k++)
				lg_row_fill(i, k, dim, &t[i][k * dim]);
		}
	}

	// The reply to @req into @resp; an error status for a bad request.
	grpc::Status lookup(const FetchRequest &req, FetchReply *resp) const
	{
		size_t n = (size_t)req.keys_size(), row = dim * sizeof(float);

		if (req.table() >= t.size())
			return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no such table");
		const float *base = t[req.table()].data();
		const uint64_t *keys = req.keys().data();
		resp->set_dim(dim);
		std::string *out = resp->mutable_rows();
		out->resize(n * row);
		char *p = out->data();
		for (size_t i = 0; i < n; i++, p += row) {
			if (keys[i] >= rows) {
				resp->Clear();
				return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "key past the table");
			}
			memcpy(p, base + keys[i] * dim, row);
		}
		return grpc::Status::OK;
	}
};

int server_main(int argc, char **argv)
{
	sigset_t stop = gb::stop_signals_block();
	gb::Opts o("grpc-fetch server", argc, argv, 2);
	gb::ServerOpts so;
	uint64_t ntables = 4, dim = 32;
	Tables tab;
	int port = 0;

	while (o.more()) {
		if (so.option(o) || o.value("--tables", &ntables) || o.value("--rows", &tab.rows) ||
		    o.value("--dim", &dim))
			continue;
		o.unknown();
	}
	so.check(o);
	if (!ntables || ntables > 1024 || !tab.rows || !dim || dim > 65536)
		o.die("--tables must be 1..1024, --dim 1..65536, --rows > 0");
	if (tab.rows > (1ull << 36) / dim / ntables)
		o.die("--tables x --rows x --dim must be at most 2^36 values (256 GiB)");
	tab.dim = (uint32_t)dim;
	try {
		tab.fill((uint32_t)ntables);
	} catch (const std::bad_alloc &) {
		fprintf(stderr, "grpc-fetch server: no memory for %" PRIu64 " x %" PRIu64
			" rows of %" PRIu64 " floats\n", ntables, tab.rows, dim);
		return 1;
	}

	grpc::ServerBuilder b;
	Ps::AsyncService svc;
	gb::configure_server(b, so.listen, &port);
	b.RegisterService(&svc);
	return gb::serve_unary<Ps::AsyncService, FetchRequest, FetchReply>(
		"grpc-fetch server", b, &port, (unsigned)so.threads, so.ready(), stop, &svc,
		&Ps::AsyncService::RequestFetch, [&tab](FetchRequest &req, FetchReply *resp) {
			return tab.lookup(req, resp);
		});
}

// ---- ranker -------------------------------------------------------------

struct RankerCfg {
	double qps = 1000, alpha = 1.09, seconds = 10, warmup = 1;
	uint64_t keys = 1024, ntables = 4, rows = 1 << 20, dim = 32, deadline_ms = 30;
	uint64_t pool = 0, threads = 1, max_out = 1000, seed = 1;
	std::string verify = "sample";
	std::string cdf; // --cdf FILE: the latency CDF (lg_hist_write_cdf())
	bool json = false;
};

// One fetch in flight, reused from a free list: the ranker's output array
// and the dedupe map keep their memory from one query to the next.
struct Fetch {
	std::unique_ptr<grpc::ClientContext> ctx;
	std::unique_ptr<grpc::ClientAsyncResponseReader<FetchReply>> rd;
	FetchRequest req;
	FetchReply resp;
	grpc::Status st;
	const std::vector<uint64_t> *keys; // the query's keys (pool), caller's order
	std::vector<uint32_t> slot;        // keys[i] is req.keys(slot[i])
	std::vector<float> out;            // keys->size() * dim: the gathered rows
	uint32_t table;
	uint64_t sched_ns, sent_ns;
	bool measured;
};

// Dedupe: an open-addressing map key -> index in the request, cleared in
// O(1) between queries by a generation stamp.
class Dedupe {
 public:
	explicit Dedupe(size_t keys)
	{
		size_t n = 16;

		while (n < 2 * keys)
			n <<= 1;
		mask_ = n - 1;
		key_.resize(n);
		idx_.resize(n);
		gen_.assign(n, 0);
	}
	// Fills f->req.keys with the distinct keys and f->slot.
	void run(Fetch *f)
	{
		const std::vector<uint64_t> &k = *f->keys;
		auto *uk = f->req.mutable_keys();

		if (++cur_ == 0) { // the stamp wrapped: clear for real
			std::fill(gen_.begin(), gen_.end(), 0);
			cur_ = 1;
		}
		uk->Clear();
		uk->Reserve((int)k.size());
		f->slot.resize(k.size());
		for (size_t i = 0; i < k.size(); i++) {
			size_t h = lg_splitmix64(k[i]) & mask_;

			while (gen_[h] == cur_ && key_[h] != k[i])
				h = (h + 1) & mask_;
			if (gen_[h] != cur_) {
				gen_[h] = cur_;
				key_[h] = k[i];
				idx_[h] = (uint32_t)uk->size();
				uk->Add(k[i]);
			}
			f->slot[i] = idx_[h];
		}
	}

 private:
	size_t mask_;
	std::vector<uint64_t> key_;
	std::vector<uint32_t> idx_, gen_;
	uint32_t cur_ = 0;
};

// What the completion threads found, merged at the end.
struct Tally {
	gb::Hist hist, lag; // scheduled -> done; scheduled -> sent
	uint64_t done = 0, errors = 0, timeouts = 0, bad_rows = 0, unique = 0;
	std::string first_error;
};

class Ranker {
 public:
	explicit Ranker(const RankerCfg &c) : c_(c), dedupe_(c.keys) {}

	void run(gb::Peer *peer);
	void report(double secs, const gb::Peer &peer) const;
	const Tally &total() const { return total_; }

 private:
	void draw_pool();
	Fetch *get();
	void put(Fetch *f);
	void send(Fetch *f, uint64_t q);
	void complete(Fetch *f, Tally *t);
	void phase(double seconds, bool measured, uint64_t seed);

	const RankerCfg &c_;
	std::vector<std::vector<uint64_t>> pool_;
	std::vector<std::unique_ptr<Ps::Stub>> stubs_;
	std::vector<std::unique_ptr<grpc::CompletionQueue>> cqs_;
	std::vector<std::unique_ptr<Tally>> tallies_;
	Dedupe dedupe_;
	std::mutex mu_;
	std::condition_variable cv_;
	std::vector<Fetch *> free_;
	uint64_t outstanding_ = 0, queries_ = 0;
	Tally total_;
};

void Ranker::draw_pool()
{
	struct lg_zipf z;
	struct lg_rng r;

	lg_zipf_init(&z, c_.rows, c_.alpha);
	lg_rng_seed(&r, c_.seed);
	pool_.resize(c_.pool);
	for (auto &q : pool_) {
		q.resize(c_.keys);
		for (auto &k : q)
			k = lg_zipf_next(&z, &r);
	}
}

Fetch *Ranker::get()
{
	std::unique_lock<std::mutex> l(mu_);

	// Past --max-outstanding the sender waits; its lateness counts as
	// latency of the next queries, as it would for a real ranker.
	cv_.wait(l, [&] { return outstanding_ < c_.max_out; });
	outstanding_++;
	if (!free_.empty()) {
		Fetch *f = free_.back();
		free_.pop_back();
		return f;
	}
	return new Fetch();
}

void Ranker::put(Fetch *f)
{
	std::lock_guard<std::mutex> l(mu_);

	free_.push_back(f);
	outstanding_--;
	cv_.notify_all();
}

void Ranker::send(Fetch *f, uint64_t q)
{
	size_t t = q % stubs_.size();

	f->keys = &pool_[q % pool_.size()];
	f->table = (uint32_t)(q % c_.ntables);
	dedupe_.run(f);
	f->req.set_table(f->table);
	f->ctx.reset(new grpc::ClientContext());
	if (c_.deadline_ms)
		f->ctx->set_deadline(std::chrono::system_clock::now() +
				     std::chrono::milliseconds(c_.deadline_ms));
	f->rd = stubs_[t]->AsyncFetch(f->ctx.get(), f->req, cqs_[t].get());
	f->rd->Finish(&f->resp, &f->st, f);
}

void Ranker::complete(Fetch *f, Tally *t)
{
	size_t n = f->keys->size(), uniq = (size_t)f->req.keys_size(), row = c_.dim * sizeof(float);
	bool ok = f->st.ok() && f->resp.dim() == c_.dim && f->resp.rows().size() == uniq * row;

	if (ok) {
		const char *rows = f->resp.rows().data();

		f->out.resize(n * c_.dim);
		for (size_t i = 0; i < n; i++)
			memcpy(&f->out[i * c_.dim], rows + (size_t)f->slot[i] * row, row);
	}
	uint64_t now = gb::now_ns();
	if (f->measured) {
		lg_hist_add(t->hist.h, now > f->sched_ns ? now - f->sched_ns : 0);
		lg_hist_add(t->lag.h, f->sent_ns > f->sched_ns ? f->sent_ns - f->sched_ns : 0);
		t->done++;
		t->unique += uniq;
		if (f->st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
			t->timeouts++;
		} else if (!ok) {
			if (!t->errors++)
				t->first_error = f->st.ok() ? "reply of the wrong size" :
					"status " + std::to_string(f->st.error_code()) + " " +
					f->st.error_message();
		}
	}
	// Verification is not the ranker's work: after the timestamp.
	if (ok && c_.verify != "none") {
		size_t m = c_.verify == "all" ? n : 1;

		for (size_t i = 0; i < m; i++)
			if (!lg_row_check(f->table, (*f->keys)[i], c_.dim, &f->out[i * c_.dim]))
				t->bad_rows++;
	}
	f->rd.reset();
	f->ctx.reset();
	put(f);
}

// Arrivals for @seconds; returns once every fetch of the phase completed.
void Ranker::phase(double seconds, bool measured, uint64_t seed)
{
	struct lg_poisson p;
	uint64_t start = gb::now_ns(), end = start + (uint64_t)(seconds * 1e9);

	lg_poisson_init(&p, c_.qps, start, seed);
	for (;;) {
		uint64_t at = lg_poisson_next(&p);

		if (at >= end)
			break;
		Fetch *f = get();
		lg_sleep_until(at);
		f->sched_ns = at;
		f->sent_ns = gb::now_ns();
		f->measured = measured;
		send(f, queries_++);
	}
	std::unique_lock<std::mutex> l(mu_);
	cv_.wait(l, [&] { return outstanding_ == 0; });
}

void Ranker::run(gb::Peer *peer)
{
	std::vector<std::thread> th;

	draw_pool();
	for (uint64_t t = 0; t < c_.threads; t++) {
		stubs_.push_back(Ps::NewStub(gb::make_channel(peer->addr(), (int)t)));
		cqs_.emplace_back(new grpc::CompletionQueue());
		tallies_.emplace_back(new Tally());
	}
	for (uint64_t t = 0; t < c_.threads; t++)
		th.emplace_back([this, t] {
			void *tag;
			bool ok;

			while (cqs_[t]->Next(&tag, &ok))
				complete(static_cast<Fetch *>(tag), tallies_[t].get());
		});

	if (c_.warmup > 0)
		phase(c_.warmup, false, c_.seed + 1);
	peer->cpu_begin();
	uint64_t t0 = gb::now_ns();
	phase(c_.seconds, true, c_.seed + 2);
	double secs = (double)(gb::now_ns() - t0) / 1e9;
	peer->cpu_end();

	for (auto &cq : cqs_)
		cq->Shutdown();
	for (auto &x : th)
		x.join();
	for (auto &t : tallies_) {
		lg_hist_merge(total_.hist.h, t->hist.h);
		lg_hist_merge(total_.lag.h, t->lag.h);
		total_.done += t->done;
		total_.unique += t->unique;
		total_.timeouts += t->timeouts;
		total_.bad_rows += t->bad_rows;
		if (t->errors && !total_.errors)
			total_.first_error = t->first_error;
		total_.errors += t->errors;
	}
	for (Fetch *f : free_)
		delete f;
	free_.clear();
	report(secs, *peer);
}

void Ranker::report(double secs, const gb::Peer &peer) const
{
	const Tally &t = total_;
	double cpu = peer.cpu_s();
	std::string srv = peer.server_cpu_json();
	double per_fetch = t.done ? cpu / (double)t.done * 1e6 : 0;
	double uniq = t.done ? (double)t.unique / (double)t.done : 0;

	if (c_.json) {
		printf("{\"experiment\":\"fetch\",\"impl\":\"grpc\",\"transport\":\"tcp\""
		       ",\"qps\":%.1f,\"achieved_qps\":%.1f,\"keys\":%" PRIu64
		       ",\"unique_keys_avg\":%.1f,\"alpha\":%.3f,\"tables\":%" PRIu64
		       ",\"rows\":%" PRIu64 ",\"dim\":%" PRIu64 ",\"deadline_ms\":%" PRIu64
		       ",\"queries\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"timeouts\":%" PRIu64
		       ",\"bad_rows\":%" PRIu64 ",\"avg_us\":%.3f,\"p50_us\":%.3f,\"p90_us\":%.3f"
		       ",\"p99_us\":%.3f,\"p999_us\":%.3f,\"max_us\":%.3f,\"send_lag_p50_us\":%.3f"
		       ",\"send_lag_p99_us\":%.3f,\"cpu_us_per_fetch\":%.2f"
		       ",\"cpu_s\":%.4f,\"client_cpu_s\":%.4f,\"server_cpu_s\":%s"
		       ",\"verify\":\"%s\",\"threads\":%" PRIu64 "}\n",
		       c_.qps, (double)t.done / secs, c_.keys, uniq, c_.alpha, c_.ntables, c_.rows,
		       c_.dim, c_.deadline_ms, t.done, t.errors + t.timeouts, t.timeouts, t.bad_rows,
		       t.hist.avg_us(), t.hist.us(0.5), t.hist.us(0.9), t.hist.us(0.99),
		       t.hist.us(0.999), t.hist.us(1), t.lag.us(0.5), t.lag.us(0.99), per_fetch, cpu,
		       peer.client_cpu_s, srv.c_str(), c_.verify.c_str(),
		       c_.threads);
		return;
	}
	printf("grpc-fetch ranker: %.0f queries/s offered, %.0f done; %" PRIu64 " keys/query"
	       " (%.0f distinct), Zipf %.2f over %" PRIu64 " rows x %" PRIu64 " tables, dim %"
	       PRIu64 "\n"
	       "  fetches %" PRIu64 ", failed %" PRIu64 " (%" PRIu64 " past the %" PRIu64
	       " ms deadline), wrong rows %" PRIu64 "\n"
	       "  latency us: avg %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n"
	       "  of which the sender's lag behind the schedule: p50 %.1f  p99 %.1f\n"
	       "  CPU %.1f us per fetch (client %.3f s, server %s s)\n",
	       c_.qps, (double)t.done / secs, c_.keys, uniq, c_.alpha, c_.rows, c_.ntables, c_.dim,
	       t.done, t.errors + t.timeouts, t.timeouts, c_.deadline_ms, t.bad_rows,
	       t.hist.avg_us(), t.hist.us(0.5), t.hist.us(0.9), t.hist.us(0.99), t.hist.us(0.999),
	       t.hist.us(1), t.lag.us(0.5), t.lag.us(0.99), per_fetch, peer.client_cpu_s,
	       srv == "null" ? "unknown" : srv.c_str());
}

int ranker_main(int argc, char **argv)
{
	const char *prog = "grpc-fetch ranker";
	gb::Opts o(prog, argc, argv, 2);
	RankerCfg c;
	gb::Peer peer;

	while (o.more()) {
		if (o.flag("--json")) {
			c.json = true;
			continue;
		}
		if (o.value("--qps", &c.qps) || o.value("--keys", &c.keys) ||
		    o.value("--alpha", &c.alpha) || o.value("--seconds", &c.seconds) ||
		    o.value("--warmup", &c.warmup) || o.value("--deadline-ms", &c.deadline_ms) ||
		    o.value("--verify", &c.verify) || o.value("--pool", &c.pool) ||
		    o.value("--threads", &c.threads) || o.value("--max-outstanding", &c.max_out) ||
		    o.value("--seed", &c.seed) || o.value("--tables", &c.ntables) ||
		    o.value("--rows", &c.rows) || o.value("--dim", &c.dim) ||
		    o.value("--cdf", &c.cdf) || peer.option(o))
			continue;
		o.unknown();
	}
	if (!(c.qps > 0) || !(c.seconds > 0) || c.warmup < 0 || !c.keys || c.keys > (1u << 24) ||
	    !c.ntables || !c.rows || !c.dim || !c.threads || c.threads > 1024 || !c.max_out ||
	    !(c.alpha > 0))
		o.die("--qps, --seconds, --keys (<= 16M), --tables, --rows, --dim, --threads "
		      "(<= 1024), --max-outstanding and --alpha must be > 0");
	if (c.verify != "all" && c.verify != "sample" && c.verify != "none")
		o.die("--verify must be all, sample or none");
	if (!c.pool) // ~8M keys drawn up front (64 MiB), at most 1024 queries
		c.pool = std::max<uint64_t>(16, std::min<uint64_t>(1024, (8u << 20) / c.keys));
	if (!peer.start(prog, { "--tables", std::to_string(c.ntables), "--rows",
				std::to_string(c.rows), "--dim", std::to_string(c.dim) }))
		return 1;

	int rc = 0;
	{
		Ranker r(c);
		r.run(&peer);
		const Tally &t = r.total();
		if (!c.cdf.empty()) {
			int e = lg_hist_write_cdf(t.hist.h, c.cdf.c_str());
			if (e) {
				fprintf(stderr, "%s: %s: %s\n", prog, c.cdf.c_str(), strerror(-e));
				rc = 1;
			}
		}
		if (t.bad_rows) {
			fprintf(stderr, "%s: %" PRIu64 " rows had wrong values\n", prog, t.bad_rows);
			rc = 1;
		}
		if (t.errors) {
			fprintf(stderr, "%s: %" PRIu64 " fetches failed, first: %s\n", prog,
				t.errors, t.first_error.c_str());
			rc = 1;
		}
	}
	return peer.stop(prog) || rc;
}

} // namespace

int main(int argc, char **argv)
{
	return gb::run_mode("grpc-fetch", kUsage, argc, argv,
			    { { "server", server_main }, { "ranker", ranker_main } });
}
