/*
 * stats.c - counters of channels, replicas, addresses and the server, as
 * structs and as JSON.
 *
 * Channel counters count calls by their outcome; address counters count
 * what happened on that address (attempts, connections lost, probes,
 * switches onto it). The JSON is written into the caller's buffer
 * (util/jsonw.h) and returns the length it needs, like be_worker_stats_json():
 * one object per channel with its counters, the latency quantiles in
 * microseconds, and each replica with its state, path and addresses.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "util/jsonw.h"

void be__rpc_count_error(struct be_rpc_counters *c, int status)
{
	c->errors++;
	switch (status) {
	case -ETIMEDOUT:
		c->timeouts++;
		break;
	case -ECANCELED:
		c->canceled++;
		break;
	case -EHOSTUNREACH:
		c->unavailable++;
		break;
	case BE_EPROTO_PEER:
		c->proto_errors++;
		break;
	case -ECONNRESET:
	case -ECONNREFUSED:
	case -ECONNABORTED:
	case -ENOTCONN:
	case -EPIPE:
	case -ENETUNREACH:
	case -ENETDOWN:
	case BE_ECONNFAULT:
		c->conn_errors++;
		break;
	default:
		c->server_errors++;
		break;
	}
}

void be_rpc_chan_stats_sized(struct be_rpc_chan *ch, struct be_rpc_chan_stats *out)
{
	struct be_rpc_chan_stats st;
	uint32_t i, ej = 0;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	st.c = ch->c;
	st.replicas = ch->nreps;
	for (i = 0; i < ch->nreps; i++)
		ej += ch->reps[i]->state == BE_RPC_REP_EJECTED ||
		      ch->reps[i]->state == BE_RPC_REP_PROBING;
	st.ejected = ej;
	st.lat = ch->lat;
	be__abi_write(out, &st, sizeof(st), RPC_CHAN_STATS_V1);
}

int be_rpc_chan_replica_stats_sized(struct be_rpc_chan *ch, unsigned int i,
				    struct be_rpc_replica_stats *user)
{
	const struct rpc_replica *rep;
	struct be_rpc_replica_stats st;
	uint32_t j;

	if (i >= ch->nreps)
		return -ENOENT;
	rep = ch->reps[i];
	st = (struct be_rpc_replica_stats){
		.size = sizeof(st), .state = rep->state, .path = rep->path,
		.version = rep->rec.version, .epoch = rep->rec.epoch, .naddrs = rep->rec.naddrs,
		.outstanding = rep->outstanding, .ejections = rep->ejections,
		.returns = rep->returns, .fails_in_row = rep->fails_row,
		.server_draining = rep->srv_draining,
	};
	memcpy(st.name, rep->rec.replica, sizeof(st.name));
	for (j = 0; j < rep->rec.naddrs; j++) {
		memcpy(st.addrs[j].addr, rep->addrs[j].str, sizeof(st.addrs[j].addr));
		st.addrs[j].state = rep->addrs[j].state;
		st.addrs[j].c = rep->addrs[j].c;
	}
	be__abi_write(user, &st, sizeof(st), RPC_REPLICA_STATS_V1);
	return 0;
}

/* ---- JSON */

static void json_counters(struct be__jsonw *o, const struct be_rpc_counters *c)
{
#define F(x) be__jsonw_put(o, "\"" #x "\":%" PRIu64 ",", (uint64_t)c->x)
	F(calls);
	F(ok);
	F(errors);
	F(timeouts);
	F(canceled);
	F(conn_errors);
	F(proto_errors);
	F(server_errors);
	F(unavailable);
	F(retries);
	F(hedges);
	F(hedge_wins);
	F(budget_denied);
	F(late_replies);
	F(req_copies);
	F(port_switches);
	F(port_returns);
	F(fallbacks);
	F(fallback_returns);
	F(ejections);
	F(returns);
	F(probes);
	F(probe_failures);
	F(drains);
#undef F
	be__jsonw_put(o, "\"outstanding\":%" PRIu64, c->outstanding);
}

static const char *addr_state_name(int st)
{
	static const char *const names[] = { "idle", "up", "down", "probing" };

	return st >= 0 && st < 4 ? names[st] : "?";
}

static const char *rep_state_name(int st)
{
	static const char *const names[] = { "active", "ejected", "probing", "draining", "removed" };

	return st >= 0 && st < 5 ? names[st] : "?";
}

int be_rpc_chan_stats_json(struct be_rpc_chan *ch, char *buf, size_t len)
{
	struct be__jsonw o = { buf, len, 0 };
	uint32_t i, j;

	if (!ch || (!buf && len))
		return -EINVAL;
	be__jsonw_put(&o, "{");
	json_counters(&o, &ch->c);
	be__jsonw_put(&o, ",\"latency_us\":{\"count\":%" PRIu64 ",\"p50\":%.1f,\"p90\":%.1f,"
		     "\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f},",
		 ch->lat.count, be_rpc_hist_quantile(&ch->lat, 0.5) / 1e3,
		 be_rpc_hist_quantile(&ch->lat, 0.9) / 1e3, be_rpc_hist_quantile(&ch->lat, 0.99) / 1e3,
		 be_rpc_hist_quantile(&ch->lat, 0.999) / 1e3, ch->lat.max_ns / 1e3);
	be__jsonw_put(&o, "\"replicas\":[");
	for (i = 0; i < ch->nreps; i++) {
		const struct rpc_replica *rep = ch->reps[i];

		be__jsonw_put(&o, "%s{\"name\":", i ? "," : "");
		be__jsonw_str(&o, rep->rec.replica);
		be__jsonw_put(&o, ",\"state\":\"%s\",\"path\":", rep_state_name(rep->state));
		if (rep->path >= 0)
			be__jsonw_str(&o, rep->addrs[rep->path].str);
		else
			be__jsonw_put(&o, "null");
		be__jsonw_put(&o, ",\"version\":%" PRIu64 ",\"epoch\":%" PRIu64 ",\"outstanding\":%u,"
			     "\"ejections\":%" PRIu64 ",\"returns\":%" PRIu64 ",\"fails_in_row\":%u,"
			     "\"server_draining\":%s,\"addrs\":[",
			 rep->rec.version, rep->rec.epoch, rep->outstanding, rep->ejections,
			 rep->returns, rep->fails_row, rep->srv_draining ? "true" : "false");
		for (j = 0; j < rep->rec.naddrs; j++) {
			be__jsonw_put(&o, "%s{\"addr\":", j ? "," : "");
			be__jsonw_str(&o, rep->addrs[j].str);
			be__jsonw_put(&o, ",\"state\":\"%s\",", addr_state_name(rep->addrs[j].state));
			json_counters(&o, &rep->addrs[j].c);
			be__jsonw_put(&o, "}");
		}
		be__jsonw_put(&o, "]}");
	}
	be__jsonw_put(&o, "]}");
	return (int)o.pos;
}

int be_rpc_server_stats_json(struct be_rpc *rpc, char *buf, size_t len)
{
	struct be__jsonw o = { buf, len, 0 };
	const struct be_rpc_server_stats *s = &rpc->ss;

	if (!rpc || (!buf && len))
		return -EINVAL;
#define F(x, sep) be__jsonw_put(&o, "\"" #x "\":%" PRIu64 sep, (uint64_t)s->x)
	be__jsonw_put(&o, "{");
	F(requests, ",");
	F(replies, ",");
	F(errors, ",");
	F(oneway, ",");
	F(refused_deadline, ",");
	F(refused_draining, ",");
	F(no_method, ",");
	F(proto_errors, ",");
	F(replies_dropped, ",");
	F(pings, ",");
	F(notices, ",");
	F(in_flight, ",");
	F(conns, "");
	be__jsonw_put(&o, ",\"draining\":%s}", rpc->draining ? "true" : "false");
#undef F
	return (int)o.pos;
}
