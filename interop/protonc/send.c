/*
 * protonc-send: send COUNT messages with Qpid Proton C (proactor API) and wait for the broker's
 * outcome of each.
 *
 * stdout, one JSON object per line:
 *   {"event":"ready"}
 *   {"event":"settled","n":0,"state":"accepted"}
 *   {"event":"summary","sent":N,"accepted":N,"rejected":0,"released":0,"modified":0}
 *   {"event":"error","where":"sender","condition":"amqp:not-found","description":"..."}
 * Exit status: 0 all accepted, 1 some other outcome, 2 error, 3 timed out, 64 bad usage.
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

#include <unistd.h>

static const char *USAGE =
    "usage: protonc-send --url amqp://HOST:PORT --address ADDRESS [options]\n"
    "  --count N              messages to send (default 1)\n"
    "  --body TEXT            body template (AMQP string value), {n} = message index (default \"message {n}\")\n"
    "  --capability CAP       target capability: queue, topic (repeatable or comma-separated)\n"
    "  --property KEY=VALUE   application property, {n} allowed; integers and true/false are typed (repeatable)\n"
    "  --durable              header.durable = true\n"
    "  --container-id ID      the connection's container id\n"
    "  --timeout SECONDS      give up after this long (default 30)";

typedef struct {
    const char *url, *address, *body, *container_id;
    str_list caps, props;
    int count, timeout_s;
    bool durable;
    int sent, settled, accepted, rejected, released, modified;
    bool finished, failed;
    int exit_code;
    pn_connection_t *connection;
    pn_link_t *sender;
} app_t;

static void summary(app_t *a, bool timed_out) {
    printf("{\"event\":\"summary\",%s\"sent\":%d,\"accepted\":%d,\"rejected\":%d,\"released\":%d,\"modified\":%d}\n",
           timed_out ? "\"timed_out\":true," : "", a->sent, a->accepted, a->rejected, a->released, a->modified);
}

static void finish(app_t *a) {
    if (a->finished) return;
    a->finished = true;
    summary(a, false);
    pn_link_close(a->sender);
    pn_connection_close(a->connection);
}

static void send_one(app_t *a) {
    int n = a->sent;
    char tag[16];
    int tag_len = snprintf(tag, sizeof tag, "%d", n);
    pn_delivery(a->sender, pn_dtag(tag, tag_len));

    pn_message_t *m = pn_message();
    char *text = fill_template(a->body, n);
    pn_data_put_string(pn_message_body(m), pn_bytes(strlen(text), text));
    char id[64];
    snprintf(id, sizeof id, "protonc-%d-%d", (int)getpid(), n);
    pn_atom_t msgid;
    msgid.type = PN_STRING;
    msgid.u.as_bytes = pn_bytes(strlen(id), id);
    pn_message_set_id(m, msgid);
    if (a->durable) pn_message_set_durable(m, true);
    if (a->props.n) {
        pn_data_t *p = pn_message_properties(m);
        pn_data_put_map(p);
        pn_data_enter(p);
        for (int i = 0; i < a->props.n; i++) {
            const char *kv = a->props.items[i];
            const char *eq = strchr(kv, '=');
            pn_data_put_string(p, pn_bytes((size_t)(eq - kv), kv));
            char *value = fill_template(eq + 1, n);
            put_typed(p, value);
            free(value);
        }
        pn_data_exit(p);
    }
    if (pn_message_send(m, a->sender, NULL) < 0) {
        fprintf(stderr, "encoding failed: %s\n", pn_error_text(pn_message_error(m)));
        exit(2);
    }
    free(text);
    pn_message_free(m);
    a->sent++;
}

static void outcome(app_t *a, pn_delivery_t *d) {
    uint64_t state = pn_delivery_remote_state(d);
    const char *name;
    switch (state) {
    case PN_ACCEPTED: name = "accepted"; a->accepted++; break;
    case PN_REJECTED: name = "rejected"; a->rejected++; a->failed = true; break;
    case PN_RELEASED: name = "released"; a->released++; a->failed = true; break;
    case PN_MODIFIED: name = "modified"; a->modified++; a->failed = true; break;
    default: return; /* not a terminal outcome (yet) */
    }
    pn_delivery_tag_t tag = pn_delivery_tag(d);
    char tagbuf[16] = {0};
    memcpy(tagbuf, tag.start, tag.size < 15 ? tag.size : 15);
    printf("{\"event\":\"settled\",\"n\":%s,\"state\":\"%s\"", tagbuf, name);
    pn_condition_t *cond = pn_disposition_condition(pn_delivery_remote(d));
    if (cond && pn_condition_is_set(cond)) {
        printf(",\"condition\":");
        json_cstr(stdout, pn_condition_get_name(cond));
        printf(",\"description\":");
        json_cstr(stdout, pn_condition_get_description(cond));
    }
    printf("}\n");
    pn_delivery_settle(d);
    a->settled++;
    if (a->settled == a->count) finish(a);
}

/* Returns false when the proactor has nothing more to do. */
static bool handle(app_t *a, pn_proactor_t *p, pn_event_t *e) {
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT: {
        pn_connection_t *c = pn_event_connection(e);
        a->connection = c;
        if (a->container_id) pn_connection_set_container(c, a->container_id);
        pn_connection_open(c);
        pn_session_t *s = pn_session(c);
        pn_session_open(s);
        a->sender = pn_sender(s, "protonc-sender");
        pn_terminus_t *t = pn_link_target(a->sender);
        pn_terminus_set_address(t, a->address);
        put_symbols(pn_terminus_capabilities(t), &a->caps);
        pn_link_open(a->sender);
        break;
    }
    case PN_LINK_REMOTE_OPEN: {
        pn_link_t *l = pn_event_link(e);
        /* a refused attach comes back with no target (or an empty one), then a detach */
        if (pn_terminus_get_address(pn_link_remote_target(l))) {
            printf("{\"event\":\"ready\"}\n");
            if (a->count == 0) finish(a);
        }
        break;
    }
    case PN_LINK_FLOW: {
        pn_link_t *l = pn_event_link(e);
        while (!a->finished && pn_link_credit(l) > 0 && a->sent < a->count) send_one(a);
        break;
    }
    case PN_DELIVERY:
        outcome(a, pn_event_delivery(e));
        break;
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *l = pn_event_link(e);
        if (pn_condition_is_set(pn_link_remote_condition(l))) {
            print_error("sender", pn_link_remote_condition(l));
            a->exit_code = 2;
            a->finished = true;
            pn_connection_close(pn_event_connection(e));
        }
        break;
    }
    case PN_CONNECTION_REMOTE_CLOSE: {
        pn_connection_t *c = pn_event_connection(e);
        if (pn_condition_is_set(pn_connection_remote_condition(c))) {
            print_error("connection", pn_connection_remote_condition(c));
            a->exit_code = 2;
        }
        pn_connection_close(c);
        break;
    }
    case PN_TRANSPORT_CLOSED: {
        pn_condition_t *cond = pn_transport_condition(pn_event_transport(e));
        if (!a->finished && a->exit_code == 0) {
            print_error("transport", cond);
            a->exit_code = 2;
        }
        pn_proactor_cancel_timeout(p); /* so that the proactor becomes inactive */
        break;
    }
    case PN_PROACTOR_TIMEOUT:
        printf("{\"event\":\"timeout\",\"seconds\":%d}\n", a->timeout_s);
        summary(a, true);
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
    a.url = "amqp://127.0.0.1:5672";
    a.body = "message {n}";
    a.count = 1;
    a.timeout_s = 30;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
#define VALUE() (i + 1 < argc ? argv[++i] : (die_usage(USAGE, "missing value"), ""))
        if (!strcmp(o, "--url")) a.url = VALUE();
        else if (!strcmp(o, "--address")) a.address = VALUE();
        else if (!strcmp(o, "--count")) a.count = atoi(VALUE());
        else if (!strcmp(o, "--body")) a.body = VALUE();
        else if (!strcmp(o, "--capability")) list_add(&a.caps, VALUE(), USAGE);
        else if (!strcmp(o, "--property")) {
            const char *kv = VALUE();
            if (!strchr(kv, '=') || *kv == '=') die_usage(USAGE, "--property needs KEY=VALUE");
            list_add(&a.props, kv, USAGE);
        }
        else if (!strcmp(o, "--durable")) a.durable = true;
        else if (!strcmp(o, "--container-id")) a.container_id = VALUE();
        else if (!strcmp(o, "--timeout")) a.timeout_s = atoi(VALUE());
        else if (!strcmp(o, "--help") || !strcmp(o, "-h")) { puts(USAGE); return 0; }
        else die_usage(USAGE, o);
#undef VALUE
    }
    if (!a.address) die_usage(USAGE, "--address is required");
    list_split_commas(&a.caps, USAGE);

    char *host, *port;
    split_url(a.url, &host, &port, USAGE);
    char addr[PN_MAX_ADDR];
    pn_proactor_addr(addr, sizeof addr, host, port);
    pn_proactor_t *p = pn_proactor();
    if (a.timeout_s > 0) pn_proactor_set_timeout(p, (pn_millis_t)a.timeout_s * 1000);
    pn_proactor_connect2(p, NULL, NULL, addr);
    bool running = true;
    while (running) {
        pn_event_batch_t *batch = pn_proactor_wait(p);
        for (pn_event_t *e = pn_event_batch_next(batch); e && running; e = pn_event_batch_next(batch)) {
            running = handle(&a, p, e);
        }
        pn_proactor_done(p, batch);
    }
    pn_proactor_free(p);
    if (a.exit_code) return a.exit_code;
    return a.failed ? 1 : 0;
}
