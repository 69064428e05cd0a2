/*
 * rpc_int.h - the objects of the RPC layer (internal to src/rpc).
 *
 *   be_rpc ─┬─ timers (run + heap) + timer thread (timer.c)
 *           ├─ id tables of calls and attempts (ids.c)
 *           ├─ methods, listeners, server conns, requests (server.c)
 *           └─ channels (channel.c)
 *                └─ replicas (failover.c, eject.c)
 *                     └─ addresses ── conn (one be_sock, conn.c)
 *                                      └─ attempts in flight on it
 *   call (call.c) ── attempts (one per send of the request) ── conn
 *   scatter (scatter.c) ── legs, each a call
 *
 * Everything is touched by the worker's thread only, except the fields
 * named in struct rpc_ctl and the timer thread's handshake (timer.c).
 * Reference counts are plain ints for that reason.
 *
 * Lifetimes. A conn lives while its socket is open or something refers to
 * it (attempts, server requests). A call lives until it completed and the
 * last send of its request buffer came back. A replica removed from its
 * set lives until its last attempt finished. The be_rpc itself lives
 * until be_rpc_destroy() and the last server request held by a handler.
 */
#ifndef BE_RPC_RPC_INT_H
#define BE_RPC_RPC_INT_H

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <be/be.h>
#include <be/rpc.h>
#include "util/abi.h"
#include "util/common.h"
#include "util/list.h"

/* The v1 layouts of rpc.h's growing structs end with these fields
 * (util/abi.h). */
#define RPC_CONFIG_V1 BE__V1_SIZE(struct be_rpc_config, standby)
#define RPC_CALL_OPTS_V1 BE__V1_SIZE(struct be_rpc_call_opts, flags)
#define RPC_REQ_INFO_V1 BE__V1_SIZE(struct be_rpc_req_info, remaining_us)
#define RPC_CHAN_STATS_V1 BE__V1_SIZE(struct be_rpc_chan_stats, lat)
#define RPC_REPLICA_STATS_V1 BE__V1_SIZE(struct be_rpc_replica_stats, addrs)
#define RPC_SERVER_STATS_V1 BE__V1_SIZE(struct be_rpc_server_stats, conns)
#define RPC_NAMING_STATS_V1 BE__V1_SIZE(struct be_rpc_naming_stats, errors)

/* be__rpc_opts() - the caller's call options @user (NULL: all 0) as the
 * library's full-size struct in @o. Returns 0 or -EINVAL (bad size). */
static inline int be__rpc_opts(struct be_rpc_call_opts *o, const struct be_rpc_call_opts *user)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	return user ? be__abi_read(o, sizeof(*o), user, RPC_CALL_OPTS_V1) : 0;
}

/* ---- wire header (proto.c) */

#define RPC_MAGIC 0x5242u /* "BR" little-endian */
#define RPC_VERSION 1u

/* Header layout (offsets); the header is four little-endian words. */
#define RPC_H_VERSION 2
#define RPC_H_TYPE 3
#define RPC_H_ID 8
#define RPC_H_SERVICE 16
#define RPC_H_METHOD 20
#define RPC_H_DEADLINE 24 /* requests; replies: status; then the length */

/* The fixed bytes of the first word (magic, version, the reserved byte)
 * and, over them, the first words of the two messages of every call: a
 * first attempt with no flags but ONEWAY or IDEMPOTENT, and a reply with
 * no flag but DRAINING. */
#define RPC_W0_FIXED ((uint64_t)RPC_MAGIC | (uint64_t)RPC_VERSION << 16)
#define RPC_W0_REQ_FREE ((uint64_t)(BE_RPC_ONEWAY | BE_RPC_IDEMPOTENT) << 32)
#define RPC_W0_REPLY_FREE ((uint64_t)BE_RPC_F_DRAINING << 32)

/* Little-endian words through memcpy: one load or store each on the
 * machines we run on, and no alignment assumption about the buffer. */
static inline uint64_t be__rpc_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void be__rpc_put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

/* Fill the header in front of payload @payload: four stores of whole
 * words. Inline, so a caller's constant fields fold into the words. */
static inline void be__rpc_hdr_put(void *payload, const struct be_rpc_hdr *h)
{
	uint8_t *p = (uint8_t *)payload - BE_RPC_HDR_LEN;
	uint32_t word = h->type == BE_RPC_T_REPLY ? (uint32_t)h->status : h->deadline_us;

	be__rpc_put64(p, RPC_W0_FIXED | (uint64_t)h->type << 24 | (uint64_t)h->flags << 32 |
				 (uint64_t)h->attempt << 48);
	be__rpc_put64(p + RPC_H_ID, h->id);
	be__rpc_put64(p + RPC_H_SERVICE, (uint64_t)h->service | (uint64_t)h->method << 32);
	be__rpc_put64(p + RPC_H_DEADLINE, (uint64_t)word | (uint64_t)h->len << 32);
}

/* A header of the two messages of every call (words @w0 and @w3), valid
 * once its length matched: one comparison of the first word, and for a
 * reply its status being 0. Anything else takes the field by field
 * checks of be_rpc_hdr_decode(). */
static inline bool be__rpc_hdr_plain(uint64_t w0, uint64_t w3)
{
	return (w0 & ~RPC_W0_REQ_FREE) == (RPC_W0_FIXED | (uint64_t)BE_RPC_T_REQUEST << 24) ||
	       ((w0 & ~RPC_W0_REPLY_FREE) == (RPC_W0_FIXED | (uint64_t)BE_RPC_T_REPLY << 24) &&
		!(uint32_t)w3);
}

/* Every field of a header whose checks are done, from its four words. */
static inline void be__rpc_hdr_fill(struct be_rpc_hdr *h, uint64_t w0, uint64_t id, uint64_t w2,
				    uint64_t w3)
{
	h->type = (uint8_t)(w0 >> 24);
	h->flags = (uint16_t)(w0 >> 32);
	h->attempt = (uint8_t)(w0 >> 48);
	h->id = id;
	h->service = (uint32_t)w2;
	h->method = (uint32_t)(w2 >> 32);
	if (h->type == BE_RPC_T_REPLY) {
		h->status = (int32_t)(uint32_t)w3;
		h->deadline_us = 0;
	} else {
		h->status = 0;
		h->deadline_us = (uint32_t)w3;
	}
	h->len = (uint32_t)(w3 >> 32);
}

/* be_rpc_hdr_decode() of a received message @msg of @len bytes: the
 * plain headers of a call inline, anything else through the function. */
static inline int be__rpc_hdr_decode(const void *msg, size_t len, struct be_rpc_hdr *out,
				     const char **why)
{
	const uint8_t *p = msg;

	if (BE_LIKELY(len >= BE_RPC_HDR_LEN)) {
		uint64_t w0 = be__rpc_get64(p), w3 = be__rpc_get64(p + RPC_H_DEADLINE);

		if ((w3 >> 32) == (uint64_t)len - BE_RPC_HDR_LEN && be__rpc_hdr_plain(w0, w3)) {
			be__rpc_hdr_fill(out, w0, be__rpc_get64(p + RPC_H_ID),
					 be__rpc_get64(p + RPC_H_SERVICE), w3);
			return 0;
		}
	}
	return be_rpc_hdr_decode(msg, len, out, why);
}

/* A status a reply may carry. */
bool be__rpc_status_valid(int32_t st);
/* The type, id, service and method of a message whose header failed
 * validation but starts with our magic and version (so an error reply
 * can name the request); -EINVAL when it does not. */
int be__rpc_hdr_peek(const void *msg, size_t len, struct be_rpc_hdr *out);
/* The id field of a header we wrote ourselves. */
static inline uint64_t be__rpc_hdr_id(const void *msg)
{
	return be__rpc_get64((const uint8_t *)msg + RPC_H_ID);
}

/* ---- timers (timer.c) */

struct be_rpc;
struct rpc_tmr;
typedef void (*rpc_tmr_fn)(struct be_rpc *rpc, struct rpc_tmr *t);

struct rpc_tmr {
	uint64_t due;     /* monotonic ns */
	uint32_t idx;     /* heap position + 1; RPC_TMR_IN_RUN: in the run; 0: not armed */
	rpc_tmr_fn fn;
	struct be__list link; /* in the run */
};
#define RPC_TMR_IN_RUN UINT32_MAX

/* Timers live in one of two places (timer.c): the run, a list in order of
 * due time that takes a timer due no earlier than its last (every call
 * deadline of a stream with one timeout) in O(1), and a min-heap for the
 * others. */
struct rpc_heap {
	struct rpc_tmr **v;
	uint32_t n, cap;
	struct be__list run;
};

/* What queued worker calls (ticks, deferred completions) and the timer
 * thread share with a be_rpc that may be destroyed before they run. */
struct rpc_ctl {
	struct be_rpc *rpc;     /* NULL once destroyed (worker thread only) */
	atomic_int queued;      /* worker calls queued and not yet run */
	atomic_bool tick_queued;
};

int be__rpc_timer_start(struct be_rpc *rpc);
void be__rpc_timer_stop(struct be_rpc *rpc);
/* Arm @t at @due (re-arm if armed). 0 or -ENOMEM. */
int be__rpc_tmr_arm(struct be_rpc *rpc, struct rpc_tmr *t, uint64_t due, rpc_tmr_fn fn);
void be__rpc_tmr_cancel_heap(struct be_rpc *rpc, struct rpc_tmr *t);
/* Disarm @t (no-op when not armed); inline, as every call does it. */
static inline void be__rpc_tmr_cancel(struct be_rpc *rpc, struct rpc_tmr *t)
{
	if (t->idx == RPC_TMR_IN_RUN) {
		be__list_del_init(&t->link);
		t->idx = 0;
	} else if (t->idx) {
		be__rpc_tmr_cancel_heap(rpc, t);
	}
}
static inline bool rpc_tmr_armed(const struct rpc_tmr *t)
{
	return t->idx != 0;
}
/* Queue be__rpc_flush() to run at the next progress (deferred completions). */
void be__rpc_kick(struct be_rpc *rpc);

/* ---- id tables (ids.c): u64 handles (generation << 32 | slot) */

#define RPC_IDS_NONE UINT32_MAX /* free_head of an empty table */

struct rpc_ids {
	struct rpc_id_slot {
		uint32_t gen;
		uint32_t next_free;
		void *p;
	} *v;
	uint32_t n, cap, free_head;
};

/* The add, lookup and delete of every call are inline (ids.c explains
 * the ids); only a table that must grow calls out. */
int be__rpc_ids_grow(struct rpc_ids *t, uint32_t *slot);

/* Enter @p; its id in *@id. 0 or -ENOMEM. */
static inline int be__rpc_ids_add(struct rpc_ids *t, void *p, uint64_t *id)
{
	uint32_t i = t->free_head;

	if (i != RPC_IDS_NONE) {
		t->free_head = t->v[i].next_free;
	} else if (be__rpc_ids_grow(t, &i)) {
		return -ENOMEM;
	}
	t->v[i].p = p;
	t->v[i].next_free = RPC_IDS_NONE;
	*id = (uint64_t)t->v[i].gen << 32 | i;
	return 0;
}

/* The object of @id, or NULL; *@late set when @id was issued once and
 * its object is gone (NULL: caller does not care). */
static inline void *be__rpc_ids_get(const struct rpc_ids *t, uint64_t id, bool *late)
{
	uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);
	const struct rpc_id_slot *s;

	if (late)
		*late = false;
	if (i >= t->n || gen == 0)
		return NULL;
	s = &t->v[i];
	if (s->gen == gen && s->p)
		return s->p;
	/* Issued before when the slot has moved past that generation (or
	 * wrapped: generations only grow, skipping 0). */
	if (late && s->gen > gen)
		*late = true;
	return NULL;
}

/* Forget @id (a no-op for an id not current, 0 included). */
static inline void be__rpc_ids_del(struct rpc_ids *t, uint64_t id)
{
	uint32_t i = (uint32_t)id;
	struct rpc_id_slot *s;

	if (i >= t->n)
		return;
	s = &t->v[i];
	if (s->gen != (uint32_t)(id >> 32) || !s->p)
		return;
	s->p = NULL;
	s->gen = s->gen + 1 ? s->gen + 1 : 1;
	s->next_free = t->free_head;
	t->free_head = i;
}

void be__rpc_ids_free(struct rpc_ids *t);

/* ---- connections (conn.c) */

enum { RPC_CONN_CLIENT, RPC_CONN_SERVER };

struct rpc_addr;
struct rpc_lst;

struct rpc_conn {
	struct be_rpc *rpc;
	struct be_sock *s;        /* NULL once closed */
	int role;
	int refs;                 /* the socket + attempts/requests referring to it */
	bool heard;               /* received something (client: a reply) */
	bool established;         /* a send on it completed with 0 */
	uint64_t last_rx_ns;      /* client: when the last reply arrived */
	uint64_t born_ns;         /* client: when be_sock_connect() started it */
	struct rpc_addr *addr;    /* client: whose connection this is (NULL once detached) */
	struct rpc_lst *lst;      /* server: the listener that accepted it */
	struct be__list atts;     /* client: attempts waiting for a reply */
	struct be__list link;     /* server: rpc->sconns */
};

/* Drop one reference of @c; the last frees it. */
static inline void be__rpc_conn_put(struct rpc_conn *c)
{
	if (!--c->refs)
		free(c);
}
/* Close the socket (idempotent); attempts on it are failed by the caller. */
void be__rpc_conn_close(struct rpc_conn *c);
/* Send one message (header already written at @base); the send callback
 * frees copies and drops the call's hold on its buffer. */
extern const struct be_sock_cbs be__rpc_client_cbs;
extern const struct be_sock_cbs be__rpc_server_cbs;

/* ---- channels, replicas, addresses (channel.c, failover.c, eject.c) */

struct be_rpc_chan;
struct rpc_replica;

struct rpc_addr {
	struct rpc_replica *rep;
	unsigned int idx;
	char str[BE_RPC_ADDR_MAX];
	bool rdma;                /* verbs or shm: a tcp address is the fallback */
	int state;                /* enum be_rpc_addr_state */
	struct rpc_conn *conn;
	uint32_t timeouts_row;    /* attempts timed out since the last answer */
	uint32_t probe_ms;        /* next probe backoff */
	uint64_t probe_call;      /* id of the probe in flight, 0: none */
	struct rpc_tmr probe_tmr;
	struct be_rpc_counters c;
};

struct rpc_replica {
	struct be_rpc_chan *ch;
	struct be_rpc_record rec;
	struct rpc_addr addrs[BE_RPC_MAX_ADDRS];
	int path;                 /* current address, -1: none usable */
	int last_path;            /* the last path >= 0 (to name a switch) */
	int state;                /* enum be_rpc_rep_state */
	uint32_t outstanding;     /* attempts in flight (probes included) */
	uint32_t fails_row;
	uint32_t eject_level;     /* ejections in a row */
	uint64_t eject_start_ns;  /* last ejection */
	uint64_t active_since_ns; /* last return (or creation) */
	uint64_t probe_call;      /* return probe in flight, 0: none */
	struct rpc_tmr eject_tmr;
	uint64_t ejections, returns;
	bool srv_draining;        /* its server said it is draining (notice or reply flag) */
	struct be__list gone;     /* ch->gone while removed and draining */
};

struct rpc_budget {
	uint64_t bucket_ns;       /* start of the current 100 ms bucket */
	uint32_t cur;             /* index of the current bucket */
	uint32_t calls[10], spent[10];
	uint64_t sum_calls, sum_spent;
};

struct rpc_watch;

struct be_rpc_chan {
	struct be_rpc *rpc;
	struct be_rpc_config cfg;
	struct be__list link;     /* rpc->chans */
	struct rpc_replica **reps;
	uint32_t nreps, cap;
	struct be__list gone;     /* removed replicas still draining */
	struct be__list calls;    /* calls in flight */
	uint64_t min_version;
	struct rpc_budget budget;
	struct be_rpc_counters c;
	struct be_rpc_hist lat;
	struct rpc_watch *watch;  /* when fed by a naming source */
	bool destroying;
};

/* ---- calls (call.c) */

enum { RPC_CALL_USER, RPC_CALL_PROBE, RPC_CALL_LEG, RPC_CALL_SCATTER };

struct rpc_scatter;

struct rpc_attempt {
	uint64_t id;
	struct rpc_call *call;
	struct rpc_conn *conn;
	struct rpc_addr *addr;
	uint64_t sent_ns;
	uint8_t no;               /* 0 = first */
	bool hedge;
	bool sent;                /* its send completed with 0 */
	struct be__list clink;    /* conn->atts */
	struct rpc_attempt *next; /* call->atts */
	struct be__list free_link; /* rpc->att_free */
};

struct rpc_call {
	uint64_t id;
	int kind;
	struct be_rpc *rpc;
	struct be_rpc_chan *ch;
	uint32_t service, method;
	uint32_t flags;
	void *req;                /* payload pointer, NULL for len 0 */
	uint32_t len;
	int refs;                 /* 1 until completed + sends of the buffer in flight */
	bool busy;                /* a send of the original buffer is in flight */
	bool done;
	bool deferred;            /* on rpc->deferred, completing with status */
	bool hedged;
	int status;
	int last_err;             /* best error seen so far */
	uint64_t start_ns, deadline_ns;
	uint32_t timeout_us;
	uint64_t hedge_ns;        /* hedge delay */
	struct rpc_tmr dl_tmr, hedge_tmr;
	struct rpc_attempt *atts; /* outstanding attempts */
	uint32_t natts;           /* attempts made */
	struct rpc_replica *tried[8];
	be_rpc_done_cb cb;
	void *arg;
	struct rpc_addr *probe_addr;
	struct rpc_replica *probe_rep;
	struct rpc_scatter *sc;
	uint32_t leg;
	struct be__list link;     /* ch->calls, or rpc->deferred */
	struct be__list free_link; /* rpc->call_free */
};

struct rpc_scatter {
	struct rpc_call base;     /* kind RPC_CALL_SCATTER: id, deferral */
	struct be_rpc_scatter_item *items;
	uint32_t n, left;
	int first_err;
	bool fail_fast;
	be_rpc_scatter_cb cb;
	void *arg;
	uint64_t *legs;           /* call ids of the legs */
};

/* ---- server (server.c) */

struct rpc_method {
	uint64_t key;             /* service << 32 | method; 0: empty slot */
	be_rpc_handler fn;
	void *user;
	uint32_t min_remaining_us;
};

struct rpc_lst {
	struct be_listener *l;
	struct be__list link;
};

struct be_rpc_req {
	struct be_rpc *rpc;
	struct rpc_conn *conn;
	struct be_rpc_hdr h;
	uint64_t deadline_ns;     /* UINT64_MAX: none; 0: not started (server.c) */
	struct be__list free_link; /* rpc->req_free */
};

/* ---- the RPC state of a worker */

struct be_rpc {
	struct be_worker *w;
	struct be_rpc_config cfg;
	int refs;                 /* 1 until destroyed + requests held by handlers */
	bool destroyed;
	int cb_depth;             /* > 0 inside an application callback */
	uint64_t rnd;

	/* timers */
	struct rpc_heap heap;
	struct rpc_ctl *ctl;
	pthread_t thr;
	bool thr_started;
	pthread_mutex_t mu;       /* guards thr_due and stop with the thread */
	pthread_cond_t cv;
	uint64_t thr_due;         /* what the thread sleeps toward; UINT64_MAX: nothing */
	bool stop;
	uint64_t pub_due;         /* worker's copy of what it last published */
	bool kick_queued;

	/* ids and caches */
	struct rpc_ids calls, atts;
	struct be__list att_free, call_free, req_free; /* freed objects, for reuse */
	struct be_rpc_req *req_cur;  /* the request whose handler runs, until answered */
	struct be__list deferred; /* calls completing at the next flush */

	/* server */
	struct rpc_method *methods;
	uint32_t mcap, mcount;
	struct rpc_method *mlast; /* the method found last (NULL: none) */
	struct be__list lsts, sconns;
	bool draining;
	struct be_rpc_server_stats ss;

	/* client */
	struct be__list chans;
};

/* ---- cross-file internals */

uint64_t be__rpc_rand(struct be_rpc *rpc);
/* The method (service, method) in *@out: 0 or -ENOENT. A server mostly
 * sees one method after another of the same kind: the last one found
 * first, inline, then the table (server.c). */
int be__rpc_method_lookup(struct be_rpc *rpc, uint64_t key, struct rpc_method **out);
static inline int be__rpc_method_find(struct be_rpc *rpc, uint32_t service, uint32_t method,
				      struct rpc_method **out)
{
	uint64_t key = (uint64_t)service << 32 | method;

	if (rpc->mlast && rpc->mlast->key == key) {
		*out = rpc->mlast;
		return 0;
	}
	return be__rpc_method_lookup(rpc, key, out);
}
void be__rpc_server_recv(struct rpc_conn *c, void *buf, size_t len);
void be__rpc_server_conn_gone(struct rpc_conn *c);
void be__rpc_req_put_rpc(struct be_rpc *rpc);
void be__rpc_unref(struct be_rpc *rpc);

/* call.c */
void be__rpc_client_recv(struct rpc_conn *c, void *buf, size_t len);
/* The connection of @c failed with @err: fail every attempt on it. */
void be__rpc_conn_failed(struct rpc_conn *c, int err);
void be__rpc_call_complete(struct rpc_call *call, int status);
void be__rpc_flush(struct be_rpc *rpc);
void be__rpc_send_cb(struct be_sock *s, void *buf, int status, void *arg);
int be__rpc_call_start(struct be_rpc_chan *ch, int kind, uint32_t service, uint32_t method,
		       void *req, size_t len, const struct be_rpc_call_opts *o, be_rpc_done_cb cb,
		       void *arg, bool want_id, struct rpc_call **out);
int be__rpc_probe_start(struct be_rpc_chan *ch, struct rpc_addr *a, struct rpc_replica *rep,
			uint64_t *id);
void be__rpc_call_free_all(struct be_rpc *rpc);

/* channel.c */
struct rpc_replica *be__rpc_pick(struct be_rpc_chan *ch, struct rpc_call *call);
/* Free @rep if it was removed and nothing of it is in flight (inline:
 * every completed attempt asks). */
void be__rpc_replica_free(struct rpc_replica *rep);
static inline void be__rpc_replica_maybe_free(struct rpc_replica *rep)
{
	if (BE_UNLIKELY(rep->state == BE_RPC_REP_REMOVED) && !rep->outstanding)
		be__rpc_replica_free(rep);
}
void be__rpc_chan_refresh(struct be_rpc_chan *ch);

/* failover.c: address health and the path of a replica */
int be__rpc_addr_conn(struct rpc_addr *a, struct rpc_conn **out);
void be__rpc_addr_down(struct rpc_addr *a, int err);
/* An attempt on @a was answered on @c (inline: every reply does it). */
void be__rpc_addr_ok_down(struct rpc_addr *a, struct rpc_conn *c);
static inline void be__rpc_addr_ok(struct rpc_addr *a, struct rpc_conn *c)
{
	a->timeouts_row = 0;
	if (a->state == BE_RPC_ADDR_DOWN)
		be__rpc_addr_ok_down(a, c);
}
void be__rpc_addr_timeout(struct rpc_addr *a, bool silent);
/* Leave a silent path (keeping its connection); false if @a is not UP or
 * its replica has nowhere else to go. */
bool be__rpc_addr_suspect(struct rpc_addr *a);
void be__rpc_rep_path(struct rpc_replica *rep);
void be__rpc_probe_done(struct rpc_call *call, int status);
void be__rpc_addr_schedule_probe(struct rpc_addr *a);

/* eject.c */
void be__rpc_rep_failed(struct rpc_replica *rep);
static inline void be__rpc_rep_ok(struct rpc_replica *rep)
{
	rep->fails_row = 0;
}
void be__rpc_rep_probe_done(struct rpc_replica *rep, int status);
bool be__rpc_rep_usable(const struct rpc_replica *rep);
/* A reply or notice on @a's connection said its server is @draining, or
 * serving (channel.c; the change out of line). */
void be__rpc_rep_server_change(struct rpc_addr *a, bool draining);
static inline void be__rpc_rep_server_state(struct rpc_addr *a, bool draining)
{
	if (a->rep->srv_draining != draining)
		be__rpc_rep_server_change(a, draining);
}

/* budget.c */
void be__rpc_budget_deposit(struct rpc_budget *b, uint64_t now);
bool be__rpc_budget_withdraw(struct rpc_budget *b, const struct be_rpc_config *cfg, uint64_t now);

/* naming.c */
void be__rpc_watch_stop(struct rpc_watch *w);
int be__rpc_watch_snapshot(struct rpc_watch *w, struct be_rpc_record **recs, unsigned int *n);
/* For a backend: replace every record with @recs (taken; @k of them),
 * counting @refused records it left out as errors. Threads: any. */
void be__rpc_naming_replace(struct be_rpc_naming *n, struct be_rpc_record *recs, uint32_t k,
			    uint32_t refused);

/* naming_etcd.c (built with the etcd client): the etcd:// backend of
 * @n, @where is the uri after "etcd://"; stopped before @n is freed. */
struct rpc_naming_etcd;
int be__rpc_naming_etcd_open(struct be_rpc_naming *n, const char *where, uint32_t wait_ms,
			     struct rpc_naming_etcd **out);
void be__rpc_naming_etcd_close(struct rpc_naming_etcd *e);
/* ... and the registrations of include/be/rpc.h, @where as above. */
int be__rpc_reg_etcd_create(const char *where, const struct be_rpc_record *recs,
			    unsigned int nrecs, uint32_t ttl_s, struct be_rpc_reg **out);
int be__rpc_reg_etcd_set_state(struct be_rpc_reg *r, int state);
uint64_t be__rpc_reg_etcd_count(const struct be_rpc_reg *r);
void be__rpc_reg_etcd_destroy(struct be_rpc_reg *r);

/* more cross-file entry points */
void be__rpc_call_defer(struct rpc_call *call, int status);
void be__rpc_call_abort(struct rpc_call *call);
void be__rpc_chan_destroy_all(struct be_rpc *rpc);
void be__rpc_server_close_all(struct be_rpc *rpc);
void be__rpc_server_free(struct be_rpc *rpc);
int be__rpc_config_check(const struct be_rpc_config *c);
int be__rpc_watch_start(struct be_rpc_chan *ch, struct be_rpc_naming *n, const char *service,
			uint32_t shard);
void be__rpc_scatter_leg_done(struct rpc_call *leg, int status, void *reply, size_t len);
void be__rpc_scatter_notify(struct rpc_call *sc);
void be__rpc_scatter_cancel(struct rpc_call *sc);

/* hist.c: adding a value is inline, as every call does it: a count of
 * leading zeros, a shift and the adds. */
#define RPC_HIST_SUB_BITS 6
#define RPC_HIST_TOP_BIT 37 /* highest power of two with buckets of its own */

static inline uint32_t be__rpc_hist_index(uint64_t v)
{
	const uint32_t sub = 1u << RPC_HIST_SUB_BITS;
	uint32_t k;

	if (v < sub)
		return (uint32_t)v;
	k = 63u - (uint32_t)__builtin_clzll(v);
	if (k > RPC_HIST_TOP_BIT)
		return BE_RPC_HIST_BUCKETS - 1;
	return sub + (k - RPC_HIST_SUB_BITS) * sub + (uint32_t)((v >> (k - RPC_HIST_SUB_BITS)) - sub);
}

static inline void be__rpc_hist_add(struct be_rpc_hist *h, uint64_t ns)
{
	if (!h->count || ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
	h->count++;
	h->sum_ns += ns;
	h->b[be__rpc_hist_index(ns)]++;
}

/* stats.c */
void be__rpc_count_error(struct be_rpc_counters *c, int status);

static inline uint64_t rpc_now(void)
{
	return be__now_ns();
}

/* Callbacks of the application run inside these, so a nested
 * be_rpc_call_sync() can tell it must not wait. */
#define RPC_APP_CB(rpc, expr)          \
	do {                           \
		(rpc)->cb_depth++;     \
		expr;                  \
		(rpc)->cb_depth--;     \
	} while (0)

#endif /* BE_RPC_RPC_INT_H */
