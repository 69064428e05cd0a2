/*
 * raw.h - a raw transport-level peer for the hostile-peer tests of
 * test/sock (test-sock-hostile, test-sock-grant-scope): no BE core, just
 * the xport ops of one transport, speaking the Engine's handshake and
 * frames by hand (engine/proto.h) to a BE listener, so that a test can
 * send what no correct peer would. One per process: `raw`.
 */
#ifndef BE_TEST_SOCK_RAW_H
#define BE_TEST_SOCK_RAW_H

#include <stdbool.h>
#include <stdint.h>

#include <be/sock.h>
#include "engine/proto.h"
#include "xport/xport.h"

struct raw {
	const struct be_xport_ops *ops;
	struct be_xdev *dev;
	struct be_xevch *ch;
	struct be_xcq *cq;
	struct be_xsrq *srq;
	struct be_xlistener *l;  /* of raw_listen(), closed by raw_close() */
	struct be_xconn *conn;
	int alloc_dev;
	int established, dead, rejected;
	uint32_t reject_reason;
	struct be__frame resp;   /* last WRITE_RESP received */
	uint32_t rkeys[16];      /* rkeys of the first 16 WRITE_RESPs */
	int nresp, nnomem;
	int nka;                 /* KEEPALIVE frames received */
	uint16_t hello_flags;    /* of raw_connect()'s hello (BE_HELLO_F_*) */
	uint64_t ow_budget;      /* the last ONEWAY_BUDGET received ... */
	struct be_xconn *ow_conn; /* ... and the conn it came on */
	void *bufs[64];
	struct be_worker *w;     /* the server's, pumped while waiting */
};

extern struct raw raw;

/* Open a device, evch, cq and srq of @transport (64 receives posted). */
void raw_open(const char *transport);
void raw_close(void);
/* Listen on @name (an address after its "scheme://") as raw.l. */
void raw_listen(const char *name);
/*
 * raw_serve() - the BE server a raw peer talks to: st_serve() of t->cfg
 * (worker *@w, also raw.w), then raw_open(t->transport).
 * raw_serve_end() - close the sockets @srv accepted (and free its
 * array), the raw peer (raw_close), listener @l, then destroy raw.w
 * (no shutdown first) and @ctx.
 */
struct st;
struct st_server;
void raw_serve(struct st *t, struct st_server *srv, struct be_ctx **ctx, struct be_worker **w,
	       struct be_listener **l, char *addr, size_t len);
void raw_serve_end(struct be_ctx *ctx, struct st_server *srv, struct be_listener *l);
/* The keys of bemalloc's @p on the raw peer's device (rkey if set). */
uint32_t raw_lkey(const void *p, uint32_t *rkey);
void raw_post_recv(void *buf);
/* Events and completions: established, dead, WRITE_RESPs, NOMEMs,
 * KEEPALIVEs, ONEWAY_BUDGETs. */
void raw_poll(void);
/* Connect to @addr ("scheme://...") with a hello of @magic; pumps
 * raw.w until established, rejected or dead. */
void raw_connect(const char *addr, uint32_t magic, uint32_t credits);
/* Destroy raw.conn and pump raw.w until its Engine for it is gone, so
 * that the next raw_connect() starts afresh. */
void raw_hang_up(void);
/* One SEND of @len bytes at @data (inline up to 256 bytes). */
void raw_send(const void *data, uint32_t len);
/* The @n frames of @fs (payload @payload) in one SEND. */
void raw_send_frames(const struct be__frame *fs, int n, const void *payload);

/* Conditions for st_pump() (arg unused unless said). */
bool cond_established(void *arg);
bool cond_dead(void *arg);     /* the raw conn died, raw.w has no Engine */
bool cond_answers(void *arg);  /* (intptr_t)arg WRITE_RESP + NOMEM came */
bool cond_no_engine(void *arg);
bool cond_resp(void *arg);
bool cond_budget(void *arg);   /* an ONEWAY_BUDGET came on raw.conn */

#endif /* BE_TEST_SOCK_RAW_H */
