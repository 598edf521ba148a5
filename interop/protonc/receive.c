/*
 * protonc-receive: receive exactly COUNT messages with Qpid Proton C (proactor API), accepting
 * each, then leave. Grants exactly COUNT credits, so it never takes more than it prints.
 *
 * stdout, one JSON object per line:
 *   {"event":"ready","source":"ADDRESS"}    the broker attached the link (a topic subscription exists)
 *   {"event":"message","n":0,"body":"message 0","properties":{...},...}
 *   {"event":"summary","received":N}
 *   {"event":"error","where":"receiver","condition":"amqp:not-found","description":"..."}
 * Exit status: 0 done, 2 error, 3 timed out before COUNT messages, 64 bad usage.
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
    "usage: protonc-receive --url amqp://HOST:PORT --address ADDRESS [options]\n"
    "  --count N              messages to take (default 1); 0 = attach, print ready, leave\n"
    "  --capability CAP       source capability: queue, topic, shared, global (repeatable or comma-separated)\n"
    "  --selector TEXT        JMS selector (filter jms-selector, descriptor apache.org:selector-filter:string)\n"
    "  --durable NAME         durable subscription NAME: link name NAME, source durable unsettled-state,\n"
    "                         expiry never; leaving detaches (the subscription stays) unless --unsubscribe\n"
    "  --unsubscribe          leave by closing the link (for a durable subscription: delete it)\n"
    "  --client-id ID         the connection's container id (durable subscriptions are named ID.NAME)\n"
    "  --timeout SECONDS      give up after this long (default 30)";

typedef struct {
    const char *url, *address, *selector, *durable, *client_id;
    str_list caps;
    int count, timeout_s;
    bool unsubscribe;
    int received;
    bool finished;
    int exit_code;
    pn_connection_t *connection;
    pn_link_t *receiver;
    char *buf;
    size_t buf_size;
} app_t;

static void finish(app_t *a) {
    if (a->finished) return;
    a->finished = true;
    printf("{\"event\":\"summary\",\"received\":%d}\n", a->received);
    if (a->durable && !a->unsubscribe) pn_link_detach(a->receiver);
    else pn_link_close(a->receiver);
    pn_connection_close(a->connection);
}

static void print_message(app_t *a, pn_message_t *m) {
    printf("{\"event\":\"message\",\"n\":%d,\"body\":", a->received);
    json_data(stdout, pn_message_body(m));
    pn_msgid_t id = pn_message_get_id(m);
    if (id.type == PN_STRING) {
        printf(",\"message_id\":");
        json_string(stdout, id.u.as_bytes.start, id.u.as_bytes.size);
    }
    if (pn_message_get_address(m)) {
        printf(",\"to\":");
        json_cstr(stdout, pn_message_get_address(m));
    }
    if (pn_message_get_subject(m)) {
        printf(",\"subject\":");
        json_cstr(stdout, pn_message_get_subject(m));
    }
    printf(",\"durable\":%s,\"priority\":%u,\"delivery_count\":%u", pn_message_is_durable(m) ? "true" : "false",
           (unsigned)pn_message_get_priority(m), (unsigned)pn_message_get_delivery_count(m));
    if (!data_empty(pn_message_properties(m))) {
        printf(",\"properties\":");
        json_data(stdout, pn_message_properties(m));
    }
    if (!data_empty(pn_message_annotations(m))) {
        printf(",\"annotations\":");
        json_data(stdout, pn_message_annotations(m));
    }
    printf("}\n");
}

static void on_delivery(app_t *a, pn_delivery_t *d) {
    if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return;
    pn_link_t *l = pn_delivery_link(d);
    size_t size = pn_delivery_pending(d);
    if (size > a->buf_size) {
        a->buf = realloc(a->buf, size);
        a->buf_size = size;
    }
    ssize_t got = pn_link_recv(l, a->buf, size);
    pn_link_advance(l);
    if (a->finished) { /* cannot happen with exact credit; give it back if it does */
        pn_delivery_update(d, PN_RELEASED);
        pn_delivery_settle(d);
        return;
    }
    pn_message_t *m = pn_message();
    if (got < 0 || pn_message_decode(m, a->buf, (size_t)got) != 0) {
        fprintf(stderr, "undecodable message: %s\n", pn_error_text(pn_message_error(m)));
        pn_delivery_update(d, PN_REJECTED);
        pn_delivery_settle(d);
        pn_message_free(m);
        return;
    }
    print_message(a, m);
    pn_message_free(m);
    pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    a->received++;
    if (a->received >= a->count) finish(a);
}

static bool handle(app_t *a, pn_proactor_t *p, pn_event_t *e) {
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT: {
        pn_connection_t *c = pn_event_connection(e);
        a->connection = c;
        if (a->client_id) pn_connection_set_container(c, a->client_id);
        pn_connection_open(c);
        pn_session_t *s = pn_session(c);
        pn_session_open(s);
        a->receiver = pn_receiver(s, a->durable ? a->durable : "protonc-receiver");
        pn_terminus_t *src = pn_link_source(a->receiver);
        pn_terminus_set_address(src, a->address);
        put_symbols(pn_terminus_capabilities(src), &a->caps);
        if (a->durable) {
            pn_terminus_set_durability(src, PN_DELIVERIES);
            pn_terminus_set_expiry_policy(src, PN_EXPIRE_NEVER);
        }
        if (a->selector) {
            pn_data_t *f = pn_terminus_filter(src);
            pn_data_put_map(f);
            pn_data_enter(f);
            pn_data_put_symbol(f, pn_bytes(strlen("jms-selector"), "jms-selector"));
            pn_data_put_described(f);
            pn_data_enter(f);
            const char *desc = "apache.org:selector-filter:string";
            pn_data_put_symbol(f, pn_bytes(strlen(desc), desc));
            pn_data_put_string(f, pn_bytes(strlen(a->selector), a->selector));
            pn_data_exit(f);
            pn_data_exit(f);
        }
        pn_link_open(a->receiver);
        break;
    }
    case PN_LINK_REMOTE_OPEN: {
        pn_link_t *l = pn_event_link(e);
        const char *addr = pn_terminus_get_address(pn_link_remote_source(l));
        if (addr) { /* a refused attach comes back with no source (or an empty one), then a detach */
            printf("{\"event\":\"ready\",\"source\":");
            json_cstr(stdout, addr);
            printf("}\n");
            if (a->count == 0) finish(a);
            else pn_link_flow(l, a->count);
        }
        break;
    }
    case PN_DELIVERY:
        on_delivery(a, pn_event_delivery(e));
        break;
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *l = pn_event_link(e);
        if (pn_condition_is_set(pn_link_remote_condition(l))) {
            print_error("receiver", pn_link_remote_condition(l));
            a->exit_code = 2;
            a->finished = true;
            pn_connection_close(pn_event_connection(e));
        } else if (!a->finished) {
            printf("{\"event\":\"error\",\"where\":\"receiver\",\"condition\":\"detached\","
                   "\"description\":\"the broker detached the link\"}\n");
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
        if (!a->finished && a->exit_code == 0) {
            print_error("transport", pn_transport_condition(pn_event_transport(e)));
            a->exit_code = 2;
        }
        pn_proactor_cancel_timeout(p); /* so that the proactor becomes inactive */
        break;
    }
    case PN_PROACTOR_TIMEOUT:
        printf("{\"event\":\"timeout\",\"seconds\":%d}\n", a->timeout_s);
        printf("{\"event\":\"summary\",\"timed_out\":true,\"received\":%d}\n", a->received);
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
    a.count = 1;
    a.timeout_s = 30;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
#define VALUE() (i + 1 < argc ? argv[++i] : (die_usage(USAGE, "missing value"), ""))
        if (!strcmp(o, "--url")) a.url = VALUE();
        else if (!strcmp(o, "--address")) a.address = VALUE();
        else if (!strcmp(o, "--count")) a.count = atoi(VALUE());
        else if (!strcmp(o, "--capability")) list_add(&a.caps, VALUE(), USAGE);
        else if (!strcmp(o, "--selector")) a.selector = VALUE();
        else if (!strcmp(o, "--durable")) a.durable = VALUE();
        else if (!strcmp(o, "--unsubscribe")) a.unsubscribe = true;
        else if (!strcmp(o, "--client-id")) a.client_id = VALUE();
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
    free(a.buf);
    return a.exit_code;
}
