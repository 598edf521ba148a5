"""The per-message path of a consumer link: the core's queue calls `send` for one message or
`send_run` for a run of them. Raw `lib.pn_*` calls, the message's encoded bytes as they are,
rewritten only for a redelivery count or outbound annotations."""
from __future__ import annotations

from cproton_ffi.lib import pn_delivery, pn_delivery_settle, pn_link_advance, pn_link_send

from . import codec_edits, jms


class ConsumerSend:
    """Mixin of `ConsumerLink` (its slots are there)."""

    __slots__ = ()

    def send(self, consumer, ref) -> None:
        """Called by the queue: write one message on this link."""
        link = self.link
        # The tag is the message's id (unique among a queue's unsettled deliveries), so a
        # receiver recovering the link after a broker restart names messages by it; a composite
        # source's parts could share one, so its tags count up instead.
        single = len(self.consumers) == 1
        self._tag[0] = self._tag_n = ref.message.id if single else self._tag_n + 1
        d = pn_delivery(link, self._tag_arg)
        message = ref.message
        count = ref.delivery_count - 1
        data = message.encoded
        extra = consumer.queue.outbound_annotations  # e.g. a virtual topic's origin
        if self.jms:
            missing = jms.destination_annotations(message, self.broker.postoffice, self._prefixes())
            if missing is not None:
                extra = {**extra, **missing} if extra else missing
        if extra is not None:
            data = codec_edits.with_annotations(data, message.envelope, extra)
        if count > 0 and not consumer.browser:
            data = codec_edits.with_delivery_count(data, message.envelope, count)
        size = len(data)
        pn_link_send(link, data, size)
        pn_link_advance(link)
        if not single:  # the parts of a composite source share the link's credit
            for other in self.consumers:
                if other is not consumer:
                    other.credit -= 1
        if consumer.browser:
            pn_delivery_settle(d) if self.presettled else self.deliveries.__setitem__(d, None)
        elif self.presettled:
            pn_delivery_settle(d)
            consumer.queue.acknowledge(ref)
        else:
            self.deliveries[d] = ref
        conn = self.conn
        conn.out_room -= size
        if conn.out_room < 0:
            conn.output_over()  # the consumers wait for the flush (Connection.flush)
        if not conn.marked:
            conn.server.mark(conn)

    def send_run(self, consumer, run: list) -> int:
        """Called by the queue: write `run` (refs counted as delivered) in order, as `send`
        writes each, while the connection has output room; how many were written (the
        queue takes the rest back). The common link (one consumer, unsettled, no annotations
        to add) writes them in one loop here, with what `send` reads per message read once."""
        if (len(self.consumers) != 1 or self.jms or self.presettled or consumer.browser
                or consumer.queue.outbound_annotations is not None):
            send = self.send
            for i, ref in enumerate(run):
                if consumer.blocked:
                    return i
                send(consumer, ref)
            return len(run)
        link, tag, tag_arg, deliveries, conn = self.link, self._tag, self._tag_arg, self.deliveries, self.conn
        room = conn.out_room
        sent = 0
        try:
            for ref in run:
                message = ref.message
                tag[0] = message.id  # see `send`
                d = pn_delivery(link, tag_arg)
                data = message.encoded
                if ref.delivery_count > 1:
                    data = codec_edits.with_delivery_count(data, message.envelope, ref.delivery_count - 1)
                size = len(data)
                pn_link_send(link, data, size)
                pn_link_advance(link)
                deliveries[d] = ref
                sent += 1
                room -= size
                if room < 0:
                    break
        finally:
            self._tag_n = tag[0]  # as `send` leaves it, should the link count tags up later
            conn.out_room = room
            if room < 0:
                conn.output_over()  # the consumers wait for the flush (Connection.flush)
            if not conn.marked:
                conn.server.mark(conn)
        return sent

    def _prefixes(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        server = self.broker.config.server
        return server.anycast_prefixes, server.multicast_prefixes
