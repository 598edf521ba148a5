/*
 * protonc-fidelity: the Proton C client of the fidelity matrix (tests/interop/test_fidelity_matrix.py).
 *
 *   protonc-fidelity send    --url URL --address A --input IN.bin --sent SENT.bin
 *   protonc-fidelity receive --url URL --address A --count N --output OUT.bin
 *
 * Files hold messages as a 4-byte big-endian length, then the encoded message.
 * send: each message of IN is decoded section by section with Proton C's codec (pn_data_decode)
 * and encoded again (pn_data_encode); that is what is sent, one delivery each, and appended to SENT.
 * receive: grants N credits and appends each delivery's raw bytes (pn_link_recv) to OUT, accepted.
 * Output: JSON lines ({"event":"sent"|"settled"|"message"|"summary"|"error"|"timeout",...}).
 * Exit: 0 done, 1 a message was not accepted, 2 an AMQP or I/O error, 3 timed out, 64 usage.
 */
#include "common.h"

#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

static const char *USAGE =
    "usage: protonc-fidelity send --url URL --address A --input IN.bin --sent SENT.bin [--timeout S]\n"
    "       protonc-fidelity receive --url URL --address A --count N --output OUT.bin [--timeout S]";

typedef struct { char *data; size_t size; } buf_t;

typedef struct {
    bool sending;
    const char *url, *address, *input, *sent_path, *output;
    int count, timeout_s;
    buf_t *messages;
    int n_messages, next, settled, got;
    FILE *sent_file, *out_file;
    bool finished, failed;
    int exit_code;
    pn_connection_t *connection;
    pn_link_t *link;
    buf_t partial;
} app_t;

static void die_io(const char *what, const char *path) {
    printf("{\"event\":\"error\",\"where\":\"io\",\"description\":");
    json_cstr(stdout, what);
    printf(",\"path\":");
    json_cstr(stdout, path);
    printf("}\n");
    exit(2);
}

static void write_frame(FILE *f, const char *data, size_t size, const char *path) {
    unsigned char len[4] = {(unsigned char)(size >> 24), (unsigned char)(size >> 16), (unsigned char)(size >> 8),
                            (unsigned char)size};
    if (fwrite(len, 1, 4, f) != 4 || (size && fwrite(data, 1, size, f) != size)) die_io("write failed", path);
}

static void read_input(app_t *a) {
    FILE *f = fopen(a->input, "rb");
    if (!f) die_io("cannot open", a->input);
    int cap = 16;
    a->messages = calloc(cap, sizeof(buf_t));
    unsigned char len[4];
    while (fread(len, 1, 4, f) == 4) {
        size_t n = (size_t)len[0] << 24 | (size_t)len[1] << 16 | (size_t)len[2] << 8 | len[3];
        if (a->n_messages == cap) a->messages = realloc(a->messages, (size_t)(cap *= 2) * sizeof(buf_t));
        buf_t *b = &a->messages[a->n_messages++];
        b->data = malloc(n ? n : 1);
        b->size = n;
        if (n && fread(b->data, 1, n, f) != n) die_io("truncated message", a->input);
    }
    fclose(f);
}

/* Decode every section of `in` with Proton's codec and encode it again into `out`. */
static buf_t transcode(const buf_t *in) {
    buf_t out = {malloc(in->size + 64), 0};
    size_t cap = in->size + 64, pos = 0;
    pn_data_t *d = pn_data(16);
    while (pos < in->size) {
        pn_data_clear(d);
        ssize_t used = pn_data_decode(d, in->data + pos, in->size - pos);
        if (used <= 0) {
            fprintf(stderr, "decode failed at byte %zu: %s\n", pos, pn_code(used));
            exit(2);
        }
        pos += (size_t)used;
        size_t need = pn_data_encoded_size(d);
        if (out.size + need > cap) out.data = realloc(out.data, cap = out.size + need + 64);
        ssize_t wrote = pn_data_encode(d, out.data + out.size, cap - out.size);
        if (wrote < 0) {
            fprintf(stderr, "encode failed: %s\n", pn_code(wrote));
            exit(2);
        }
        out.size += (size_t)wrote;
    }
    pn_data_free(d);
    return out;
}

static void finish(app_t *a) {
    if (a->finished) return;
    a->finished = true;
    if (a->sending) printf("{\"event\":\"summary\",\"sent\":%d}\n", a->settled);
    else printf("{\"event\":\"summary\",\"received\":%d}\n", a->got);
    pn_link_close(a->link);
    pn_connection_close(a->connection);
}

static void send_one(app_t *a) {
    int n = a->next++;
    char tag[16];
    int tag_len = snprintf(tag, sizeof tag, "%d", n);
    pn_delivery(a->link, pn_dtag(tag, tag_len));
    buf_t wire = transcode(&a->messages[n]);
    if (pn_link_send(a->link, wire.data, wire.size) < 0 && wire.size) die_io("pn_link_send failed", "");
    pn_link_advance(a->link);
    write_frame(a->sent_file, wire.data, wire.size, a->sent_path);
    printf("{\"event\":\"sent\",\"n\":%d,\"size\":%zu}\n", n, wire.size);
    free(wire.data);
    free(a->messages[n].data);
    a->messages[n].data = NULL;
    if (a->next == a->n_messages) fclose(a->sent_file);
}

static void outcome(app_t *a, pn_delivery_t *d) {
    uint64_t state = pn_delivery_remote_state(d);
    const char *name;
    switch (state) {
    case PN_ACCEPTED: name = "accepted"; break;
    case PN_REJECTED: name = "rejected"; a->failed = true; break;
    case PN_RELEASED: name = "released"; a->failed = true; break;
    case PN_MODIFIED: name = "modified"; a->failed = true; break;
    default: return;
    }
    pn_delivery_tag_t tag = pn_delivery_tag(d);
    printf("{\"event\":\"settled\",\"n\":%.*s,\"state\":\"%s\"}\n", (int)tag.size, tag.start, name);
    pn_delivery_settle(d);
    if (++a->settled == a->n_messages) finish(a);
}

static void incoming(app_t *a, pn_delivery_t *d) {
    if (!pn_delivery_readable(d)) return;
    size_t pending = pn_delivery_pending(d);
    if (a->partial.size + pending > 0) a->partial.data = realloc(a->partial.data, a->partial.size + pending + 1);
    ssize_t got = pn_link_recv(a->link, a->partial.data + a->partial.size, pending);
    if (got > 0) a->partial.size += (size_t)got;
    if (pn_delivery_partial(d)) return;
    write_frame(a->out_file, a->partial.data, a->partial.size, a->output);
    fflush(a->out_file);
    printf("{\"event\":\"message\",\"n\":%d,\"size\":%zu,\"raw\":true}\n", a->got, a->partial.size);
    a->partial.size = 0;
    pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    if (++a->got == a->count) {
        fclose(a->out_file);
        finish(a);
    }
}

static bool handle(app_t *a, pn_proactor_t *p, pn_event_t *e) {
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT: {
        pn_connection_t *c = pn_event_connection(e);
        a->connection = c;
        pn_connection_open(c);
        pn_session_t *s = pn_session(c);
        pn_session_open(s);
        if (a->sending) {
            a->link = pn_sender(s, "protonc-fidelity-sender");
            pn_terminus_set_address(pn_link_target(a->link), a->address);
        } else {
            a->link = pn_receiver(s, "protonc-fidelity-receiver");
            pn_terminus_set_address(pn_link_source(a->link), a->address);
        }
        pn_link_open(a->link);
        if (!a->sending) pn_link_flow(a->link, a->count);
        break;
    }
    case PN_LINK_FLOW:
        if (a->sending)
            while (pn_link_credit(a->link) > 0 && a->next < a->n_messages) send_one(a);
        break;
    case PN_DELIVERY:
        if (a->sending) outcome(a, pn_event_delivery(e));
        else incoming(a, pn_event_delivery(e));
        break;
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH:
        if (pn_condition_is_set(pn_link_remote_condition(pn_event_link(e)))) {
            print_error("link", pn_link_remote_condition(pn_event_link(e)));
            a->exit_code = 2;
            a->finished = true;
            pn_connection_close(pn_event_connection(e));
        }
        break;
    case PN_CONNECTION_REMOTE_CLOSE: {
        pn_connection_t *c = pn_event_connection(e);
        if (pn_condition_is_set(pn_connection_remote_condition(c))) {
            print_error("connection", pn_connection_remote_condition(c));
            a->exit_code = 2;
        }
        pn_connection_close(c);
        break;
    }
    case PN_TRANSPORT_CLOSED:
        if (!a->finished && a->exit_code == 0) {
            print_error("transport", pn_transport_condition(pn_event_transport(e)));
            a->exit_code = 2;
        }
        pn_proactor_cancel_timeout(p);
        break;
    case PN_PROACTOR_TIMEOUT:
        printf("{\"event\":\"timeout\",\"seconds\":%d}\n", a->timeout_s);
        exit(3);
    case PN_PROACTOR_INACTIVE:
        return false;
    default:
        break;
    }
    return true;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    app_t a = {0};
    a.timeout_s = 60;
    if (argc < 2) die_usage(USAGE, "send or receive?");
    if (!strcmp(argv[1], "send")) a.sending = true;
    else if (strcmp(argv[1], "receive")) die_usage(USAGE, argv[1]);
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
#define VALUE() (i + 1 < argc ? argv[++i] : (die_usage(USAGE, "missing value"), ""))
        if (!strcmp(o, "--url")) a.url = VALUE();
        else if (!strcmp(o, "--address")) a.address = VALUE();
        else if (!strcmp(o, "--input")) a.input = VALUE();
        else if (!strcmp(o, "--sent")) a.sent_path = VALUE();
        else if (!strcmp(o, "--output")) a.output = VALUE();
        else if (!strcmp(o, "--count")) a.count = atoi(VALUE());
        else if (!strcmp(o, "--timeout")) a.timeout_s = atoi(VALUE());
        else die_usage(USAGE, o);
#undef VALUE
    }
    if (!a.url || !a.address) die_usage(USAGE, "--url and --address are required");
    if (a.sending) {
        if (!a.input || !a.sent_path) die_usage(USAGE, "send needs --input and --sent");
        read_input(&a);
        if (!(a.sent_file = fopen(a.sent_path, "wb"))) die_io("cannot create", a.sent_path);
    } else {
        if (!a.output) die_usage(USAGE, "receive needs --output");
        if (!(a.out_file = fopen(a.output, "wb"))) die_io("cannot create", a.output);
    }
    char *host, *port;
    split_url(a.url, &host, &port, USAGE);
    char addr[PN_MAX_ADDR];
    pn_proactor_addr(addr, sizeof addr, host, port);
    pn_proactor_t *p = pn_proactor();
    pn_proactor_set_timeout(p, (pn_millis_t)a.timeout_s * 1000);
    pn_proactor_connect2(p, NULL, NULL, addr);
    bool running = true;
    while (running) {
        pn_event_batch_t *batch = pn_proactor_wait(p);
        for (pn_event_t *e = pn_event_batch_next(batch); e && running; e = pn_event_batch_next(batch))
            running = handle(&a, p, e);
        pn_proactor_done(p, batch);
    }
    pn_proactor_free(p);
    if (a.exit_code) return a.exit_code;
    return a.failed ? 1 : 0;
}
