/*
 * Shared helpers for the Proton C interop clients: option parsing, URL splitting, JSON output
 * of AMQP values. Every line these clients print on stdout is one JSON object with an "event"
 * field, the same shape the rhea clients print.
 */
#ifndef HERMOD_INTEROP_COMMON_H
#define HERMOD_INTEROP_COMMON_H

#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/message.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 16

typedef struct {
    const char *items[MAX_LIST];
    int n;
} str_list;

static inline void die_usage(const char *usage, const char *why) {
    if (why) fprintf(stderr, "%s\n", why);
    fprintf(stderr, "%s\n", usage);
    exit(64);
}

static inline void list_add(str_list *l, const char *value, const char *usage) {
    if (l->n >= MAX_LIST) die_usage(usage, "too many repeated options");
    l->items[l->n++] = value;
}

/* Split comma-separated entries of a list in place into separate items. */
static inline void list_split_commas(str_list *l, const char *usage) {
    str_list out = {{0}, 0};
    for (int i = 0; i < l->n; i++) {
        char *copy = strdup(l->items[i]);
        for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) list_add(&out, tok, usage);
    }
    *l = out;
}

/* "amqp://[user[:pass]@]host[:port]" or "host:port" -> host and port (pointers into a copy). */
static inline void split_url(const char *url, char **host, char **port, const char *usage) {
    char *s = strdup(url);
    if (strncmp(s, "amqp://", 7) == 0) s += 7;
    else if (strstr(s, "://")) die_usage(usage, "only amqp:// urls are supported");
    char *at = strrchr(s, '@');
    if (at) s = at + 1;
    char *slash = strchr(s, '/');
    if (slash) *slash = '\0';
    if (*s == '[') { /* [v6]:port */
        char *end = strchr(s, ']');
        if (!end) die_usage(usage, "bad url");
        *end = '\0';
        *host = s + 1;
        *port = end[1] == ':' ? end + 2 : "5672";
        return;
    }
    char *colon = strrchr(s, ':');
    if (colon) {
        *colon = '\0';
        *port = colon + 1;
    } else {
        *port = "5672";
    }
    *host = s;
}

/* "{n}" in a template becomes the message index. The result is malloc'd. */
static inline char *fill_template(const char *tmpl, int n) {
    char num[24];
    snprintf(num, sizeof num, "%d", n);
    size_t cap = strlen(tmpl) + 1, len = 0;
    for (const char *p = strstr(tmpl, "{n}"); p; p = strstr(p + 3, "{n}")) cap += strlen(num);
    char *out = malloc(cap);
    for (const char *p = tmpl; *p;) {
        if (strncmp(p, "{n}", 3) == 0) {
            memcpy(out + len, num, strlen(num));
            len += strlen(num);
            p += 3;
        } else {
            out[len++] = *p++;
        }
    }
    out[len] = '\0';
    return out;
}

static inline void json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (ch < 0x20) fprintf(f, "\\u%04x", ch);
            else fputc(ch, f);
        }
    }
    fputc('"', f);
}

static inline void json_cstr(FILE *f, const char *s) { json_string(f, s ? s : "", s ? strlen(s) : 0); }

static inline void json_base64(FILE *f, const char *data, size_t n) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    fputs("{\"binary\":\"", f);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)data[i] << 16;
        if (i + 1 < n) v |= (unsigned char)data[i + 1] << 8;
        if (i + 2 < n) v |= (unsigned char)data[i + 2];
        fputc(abc[(v >> 18) & 63], f);
        fputc(abc[(v >> 12) & 63], f);
        fputc(i + 1 < n ? abc[(v >> 6) & 63] : '=', f);
        fputc(i + 2 < n ? abc[v & 63] : '=', f);
    }
    fputs("\"}", f);
}

/* The value at the data's current position as JSON; containers other than maps are shown as text. */
static void json_value(FILE *f, pn_data_t *d);

static inline void json_map(FILE *f, pn_data_t *d) {
    size_t n = pn_data_get_map(d);
    pn_data_enter(d);
    fputc('{', f);
    for (size_t i = 0; i + 1 < n; i += 2) {
        if (i) fputc(',', f);
        pn_data_next(d);
        pn_type_t kt = pn_data_type(d);
        if (kt == PN_STRING) {
            pn_bytes_t k = pn_data_get_string(d);
            json_string(f, k.start, k.size);
        } else if (kt == PN_SYMBOL) {
            pn_bytes_t k = pn_data_get_symbol(d);
            json_string(f, k.start, k.size);
        } else {
            json_cstr(f, "?");
        }
        fputc(':', f);
        pn_data_next(d);
        json_value(f, d);
    }
    fputc('}', f);
    pn_data_exit(d);
}

static void json_value(FILE *f, pn_data_t *d) {
    switch (pn_data_type(d)) {
    case PN_NULL: fputs("null", f); break;
    case PN_BOOL: fputs(pn_data_get_bool(d) ? "true" : "false", f); break;
    case PN_UBYTE: fprintf(f, "%u", pn_data_get_ubyte(d)); break;
    case PN_BYTE: fprintf(f, "%d", pn_data_get_byte(d)); break;
    case PN_USHORT: fprintf(f, "%u", pn_data_get_ushort(d)); break;
    case PN_SHORT: fprintf(f, "%d", pn_data_get_short(d)); break;
    case PN_UINT: fprintf(f, "%u", pn_data_get_uint(d)); break;
    case PN_INT: fprintf(f, "%d", pn_data_get_int(d)); break;
    case PN_ULONG: fprintf(f, "%llu", (unsigned long long)pn_data_get_ulong(d)); break;
    case PN_LONG: fprintf(f, "%lld", (long long)pn_data_get_long(d)); break;
    case PN_TIMESTAMP: fprintf(f, "%lld", (long long)pn_data_get_timestamp(d)); break;
    case PN_FLOAT: fprintf(f, "%.9g", pn_data_get_float(d)); break;
    case PN_DOUBLE: fprintf(f, "%.17g", pn_data_get_double(d)); break;
    case PN_STRING: { pn_bytes_t b = pn_data_get_string(d); json_string(f, b.start, b.size); break; }
    case PN_SYMBOL: { pn_bytes_t b = pn_data_get_symbol(d); json_string(f, b.start, b.size); break; }
    case PN_BINARY: { pn_bytes_t b = pn_data_get_binary(d); json_base64(f, b.start, b.size); break; }
    case PN_MAP: json_map(f, d); break;
    default: {
        /* lists, arrays, described values, uuids, ...: proton's own text form */
        pn_data_t *one = pn_data(1);
        pn_data_appendn(one, d, 1);
        char buf[4096];
        size_t size = sizeof buf;
        if (pn_data_format(one, buf, &size) == 0) json_string(f, buf, size);
        else json_cstr(f, "<unprintable>");
        pn_data_free(one);
    }
    }
}

/* The whole content of a pn_data_t (a message section) as one JSON value, or null. */
static inline void json_data(FILE *f, pn_data_t *d) {
    pn_data_rewind(d);
    if (!pn_data_next(d)) {
        fputs("null", f);
        return;
    }
    json_value(f, d);
}

static inline bool data_empty(pn_data_t *d) {
    pn_data_rewind(d);
    return !pn_data_next(d);
}

static inline void print_error(const char *where, pn_condition_t *cond) {
    printf("{\"event\":\"error\",\"where\":");
    json_cstr(stdout, where);
    printf(",\"condition\":");
    json_cstr(stdout, cond && pn_condition_is_set(cond) ? pn_condition_get_name(cond) : "error");
    printf(",\"description\":");
    json_cstr(stdout, cond && pn_condition_is_set(cond) && pn_condition_get_description(cond)
                          ? pn_condition_get_description(cond) : "");
    printf("}\n");
}

/* A symbol array (capabilities) from a list of names. */
static inline void put_symbols(pn_data_t *d, const str_list *l) {
    if (!l->n) return;
    pn_data_put_array(d, false, PN_SYMBOL);
    pn_data_enter(d);
    for (int i = 0; i < l->n; i++) pn_data_put_symbol(d, pn_bytes(strlen(l->items[i]), l->items[i]));
    pn_data_exit(d);
}

/* A command-line property value: integers become long, true/false booleans, the rest strings. */
static inline void put_typed(pn_data_t *d, const char *text) {
    char *end = NULL;
    if (*text) {
        long long v = strtoll(text, &end, 10);
        if (end && *end == '\0') {
            pn_data_put_long(d, v);
            return;
        }
    }
    if (strcmp(text, "true") == 0) pn_data_put_bool(d, true);
    else if (strcmp(text, "false") == 0) pn_data_put_bool(d, false);
    else pn_data_put_string(d, pn_bytes(strlen(text), text));
}

#endif
