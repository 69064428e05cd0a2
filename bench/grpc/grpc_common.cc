// grpc_common.cc - channel and server settings, the server child, options.
//
// Settings, and why (a team tuning gRPC for an in-datacenter service
// would do the same):
// - Plaintext (insecure credentials): loopback, like our tcp transport,
//   which has no TLS either.
// - Message limits raised to 256 MiB both ways: the default 4 MiB receive
//   limit refuses a 16k-key fetch of 64-dim rows (exactly 4 MiB of floats).
// - Everything else default: HTTP/2 flow control and BDP probing, the
//   epoll1 poller, no compression (none is configured). Retries stay on
//   (the default), as a production channel would keep them.
#include "grpc_common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

namespace gb {

static const int kMaxMessage = 256 << 20;

unsigned half_cores()
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n >= 2 ? (unsigned)(n / 2) : 1;
}

std::shared_ptr<grpc::Channel> make_channel(const std::string &addr, int conn)
{
	grpc::ChannelArguments args;

	args.SetMaxReceiveMessageSize(kMaxMessage);
	args.SetMaxSendMessageSize(kMaxMessage);
	// Channels whose arguments differ never share a subchannel, so each
	// @conn gets its own TCP connection.
	args.SetInt("be.bench.conn", conn);
	return grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
}

void configure_server(grpc::ServerBuilder &b, const std::string &listen, int *port)
{
	b.SetMaxReceiveMessageSize(kMaxMessage);
	b.SetMaxSendMessageSize(kMaxMessage);
	b.AddListeningPort(listen, grpc::InsecureServerCredentials(), port);
}

// ---- completion-queue servers --------------------------------------------

// Several calls stay requested on each queue (kCqPosted) so that a burst
// of arrivals does not wait for calls to be requested again one by one.
int serve_cq(const char *prog, grpc::ServerBuilder &b, const int *port, unsigned threads,
	     int ready_fd, const sigset_t &stop,
	     const std::function<void(grpc::ServerCompletionQueue *)> &post)
{
	std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
	std::vector<std::thread> pollers;

	for (unsigned i = 0; i < threads; i++)
		cqs.push_back(b.AddCompletionQueue());
	std::unique_ptr<grpc::Server> server = b.BuildAndStart();
	if (!server || *port <= 0) {
		fprintf(stderr, "%s: cannot listen\n", prog);
		return 1;
	}
	for (auto &cq : cqs) {
		for (int i = 0; i < kCqPosted; i++)
			post(cq.get());
		pollers.emplace_back([q = cq.get()] {
			void *tag;
			bool ok;

			while (q->Next(&tag, &ok))
				static_cast<CqCall *>(tag)->proceed(ok);
		});
	}
	int rc = announce(ready_fd, *port) ? 1 : 0;
	if (ready_fd < 0)
		fprintf(stderr, "%s: listening on port %d\n", prog, *port);
	if (!rc)
		stop_signal_wait(stop);
	server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
	for (auto &cq : cqs)
		cq->Shutdown();
	for (auto &t : pollers)
		t.join();
	return rc;
}

// ---- the server process --------------------------------------------------

sigset_t stop_signals_block()
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, nullptr);
	return set;
}

void stop_signal_wait(const sigset_t &set)
{
	int sig;

	while (sigwait(&set, &sig) != 0)
		;
}

int announce(int ready_fd, int port)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "%d\n", port), rc = 0;

	if (ready_fd < 0)
		return 0;
	if (write(ready_fd, line, (size_t)n) != n)
		rc = -errno;
	close(ready_fd);
	return rc;
}

int child_spawn(const std::vector<std::string> &args, Child *c)
{
	char exe[4096], line[32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int fds[2], got = 0;
	pid_t parent = getpid(), pid;

	if (n <= 0)
		return -errno;
	exe[n] = 0;
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = errno;
		close(fds[0]);
		close(fds[1]);
		return -e;
	}
	if (pid == 0) {
		std::vector<char *> argv;
		std::string fd = std::to_string(fds[1]);

		// Die with the client, even if it is killed; PDEATHSIG survives
		// execve. The parent may already be gone by now: check.
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		fcntl(fds[1], F_SETFD, 0);
		argv.push_back(exe);
		for (const std::string &a : args)
			argv.push_back(const_cast<char *>(a.c_str()));
		argv.push_back(const_cast<char *>("--ready-fd"));
		argv.push_back(const_cast<char *>(fd.c_str()));
		argv.push_back(nullptr);
		execv(exe, argv.data());
		_exit(127);
	}
	close(fds[1]);
	c->pid = pid;
	c->port = 0;
	for (;;) {
		struct pollfd p = { fds[0], POLLIN, 0 };
		int r = poll(&p, 1, 30000);

		if (r == 0) {
			close(fds[0]);
			child_stop(c);
			return -ETIMEDOUT;
		}
		n = r < 0 ? -1 : read(fds[0], line + got, sizeof(line) - 1 - (size_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) // EOF: the child exited or closed the pipe
			break;
		got += (int)n;
		if (memchr(line, '\n', (size_t)got) || got >= (int)sizeof(line) - 1)
			break;
	}
	close(fds[0]);
	line[got] = 0;
	c->port = atoi(line);
	if (c->port <= 0) {
		child_stop(c);
		return -ECHILD;
	}
	return 0;
}

int child_stop(Child *c)
{
	int status = 0, i;

	if (c->pid <= 0)
		return 0;
	kill(c->pid, SIGTERM);
	for (i = 0; i < 1000; i++) {
		pid_t r = waitpid(c->pid, &status, WNOHANG);

		if (r == c->pid)
			break;
		if (r < 0 && errno != EINTR)
			break;
		usleep(10000);
	}
	if (i == 1000) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &status, 0);
	}
	c->pid = 0;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// ---- the server end of a client run --------------------------------------

bool ServerOpts::option(Opts &o)
{
	return o.value("--listen", &listen) || o.value("--threads", &threads) ||
	       o.value("--ready-fd", &ready_fd);
}

void ServerOpts::check(Opts &o) const
{
	if (!threads || threads > 1024)
		o.die("--threads must be 1..1024");
}

bool Peer::option(Opts &o)
{
	return o.value("--connect", &addr_) || o.value("--server-pid", &pid_) ||
	       o.value("--server-threads", &threads_);
}

bool Peer::start(const char *prog, const std::vector<std::string> &args)
{
	std::vector<std::string> argv = { "server", "--threads", std::to_string(threads_) };
	int rc;

	if (!addr_.empty())
		return true;
	if (!threads_ || threads_ > 1024) {
		fprintf(stderr, "%s: --server-threads must be 1..1024\n", prog);
		return false;
	}
	argv.insert(argv.end(), args.begin(), args.end());
	rc = child_spawn(argv, &child_);
	if (rc) {
		fprintf(stderr, "%s: cannot start the server: %s\n", prog, strerror(-rc));
		return false;
	}
	addr_ = "127.0.0.1:" + std::to_string(child_.port);
	pid_ = (uint64_t)child_.pid;
	return true;
}

void Peer::cpu_begin()
{
	c0_ = lg_proc_cpu_s(0);
	s0_ = pid_ ? lg_proc_cpu_s((pid_t)pid_) : -1;
}

void Peer::cpu_end()
{
	double s1 = pid_ ? lg_proc_cpu_s((pid_t)pid_) : -1;

	client_cpu_s = lg_proc_cpu_s(0) - c0_;
	server_cpu_s = s0_ >= 0 && s1 >= 0 ? s1 - s0_ : -1;
}

std::string Peer::server_cpu_json() const
{
	char b[32];

	if (server_cpu_s < 0)
		return "null";
	snprintf(b, sizeof(b), "%.4f", server_cpu_s);
	return b;
}

int Peer::stop(const char *prog)
{
	int rc = child_stop(&child_);

	if (!rc)
		return 0;
	fprintf(stderr, "%s: the server exited with status %d\n", prog, rc);
	return 1;
}

int run_mode(const char *prog, const char *usage, int argc, char **argv,
	     std::initializer_list<Mode> modes)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (const Mode &m : modes)
		if (!strcmp(argv[1], m.name))
			return m.run(argc, argv);
	fprintf(stderr, "%s: unknown mode '%s'\n%s", prog, argv[1], usage);
	return 2;
}

// ---- options -----------------------------------------------------------

Opts::Opts(const char *prog, int argc, char **argv, int first)
	: prog_(prog), argc_(argc), argv_(argv), i_(first)
{
}

void Opts::die(const std::string &msg)
{
	fprintf(stderr, "%s: %s\n", prog_, msg.c_str());
	exit(2);
}

void Opts::unknown()
{
	die(std::string("unknown option '") + argv_[i_] + "' (--help lists them)");
}

bool Opts::flag(const char *name)
{
	if (strcmp(argv_[i_], name))
		return false;
	i_++;
	return true;
}

bool Opts::value(const char *name, std::string *out)
{
	if (strcmp(argv_[i_], name))
		return false;
	if (i_ + 1 >= argc_)
		die(std::string(name) + " needs a value");
	*out = argv_[i_ + 1];
	i_ += 2;
	return true;
}

// The number in @s: an unsigned decimal with an optional K/M/G suffix.
static bool parse_number(const std::string &s, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s.c_str(), &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	*out = v;
	return end != s.c_str() && !*end && !errno && s[0] != '-';
}

static bool parse_number(const std::string &s, double *out)
{
	char *end;

	*out = strtod(s.c_str(), &end);
	return end != s.c_str() && !*end;
}

template <typename T> bool Opts::number(const char *name, T *out)
{
	std::string s;

	if (!value(name, &s))
		return false;
	if (!parse_number(s, out))
		die(std::string("bad value '") + s + "' for " + name);
	return true;
}

bool Opts::value(const char *name, uint64_t *out)
{
	return number(name, out);
}

bool Opts::value(const char *name, double *out)
{
	return number(name, out);
}

} // namespace gb
