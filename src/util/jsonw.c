/*
 * jsonw.c - JSON text into a caller's buffer (see jsonw.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "util/jsonw.h"

void be__jsonw_put(struct be__jsonw *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL, o->pos < o->len ? o->len - o->pos : 0,
		      fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

/* Strings we made (names, addresses) need no more than this. */
void be__jsonw_str(struct be__jsonw *o, const char *s)
{
	be__jsonw_put(o, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			be__jsonw_put(o, "\\%c", ch);
		else if (ch < 0x20)
			be__jsonw_put(o, "\\u%04x", ch);
		else
			be__jsonw_put(o, "%c", ch);
	}
	be__jsonw_put(o, "\"");
}
