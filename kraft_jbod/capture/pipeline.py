"""The one capture pipeline: a pcap/pcapng file object to Kafka frames and flow ends.

Strategy: :class:`CapturePipeline` chains :class:`~.pcapfile.CaptureReader` ->
:class:`~.packets.TcpDecoder` -> (optional connection bucket) ->
:class:`~.streams.FrameExtractor`. ``kraft-jbod decode`` (through
:func:`~.kafka.decode_capture`) and every task of ``kraft-jbod stats`` run it, so the two
commands cannot drift apart: a test checks that they count the same frames on every
shared capture.

Bucketing (the stats job's way to split a big file over cores): with
``bucket=Bucket(i, k)`` only connections whose endpoint pair hashes to ``i`` of ``k``
(:func:`bucket_of`, a symmetric CRC-32, stable across processes unlike ``hash``) are
reassembled; the ``k`` buckets of a file partition its connections exactly. Packets of
other buckets are most of a split file, so plain Ethernet/IPv4/TCP packets are told by
their raw address and port bytes (a cache per endpoint pair) and skip the packet
decoder; everything else goes through the decoder first.

Rules:

1. Items come out as the extractor emits them (capture order per connection), then the
   open connections are flushed at the end of the file.
2. A file cut short inside its last record ends the packets; ``truncated_offset`` says
   where, and the open connections are still flushed.
3. A malformed record mid-file raises :class:`~kraft_jbod.errors.DecodeError` from
   :meth:`CapturePipeline.items`, unless ``on_malformed`` is given: then it is called
   with the error and the open connections are flushed as at a normal end, so what was
   read before the damage (frames and connection summaries) is kept.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Final

from kraft_jbod.capture.headers import ETHERTYPE_IPV4, TCP_OVER_IPV4_KEY
from kraft_jbod.capture.packets import LINKTYPE_ETHERNET, TcpDecoder, TcpSegment
from kraft_jbod.capture.pcapfile import CaptureReader
from kraft_jbod.capture.streams import (
    DEFAULT_MAX_FRAME,
    Classifier,
    Flow,
    FlowEnd,
    Frame,
    FrameCheck,
    FrameExtractor,
    looks_like_request,
    plausible_request,
    plausible_response,
)
from kraft_jbod.errors import DecodeError

__all__ = ["Bucket", "CapturePipeline", "bucket_of", "iter_flows", "iter_frames", "read_flows"]

_BUCKET_CACHE_MAX: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Bucket:
    """Keep the connections whose :func:`bucket_of` is ``index`` (of ``count``)."""

    index: int
    count: int


def bucket_of(src: str, sport: int, dst: str, dport: int, buckets: int) -> int:
    """The bucket of a connection, the same for both directions and in every process."""
    a, b = f"{src}|{sport}", f"{dst}|{dport}"
    lo, hi = (a, b) if a <= b else (b, a)
    return zlib.crc32(f"{lo}/{hi}".encode()) % buckets


class CapturePipeline:
    """One capture file through reader, packet decoder, bucket filter and extractor.

    ``packets`` counts the records read; ``truncated_offset`` is set when the file ends
    inside a record; ``decoder`` holds the packet decoder's skip statistics.
    """

    def __init__(
        self,
        fileobj: BinaryIO,
        *,
        ports: Iterable[int] | None = None,
        classifier: Classifier = looks_like_request,
        request_check: FrameCheck = plausible_request,
        response_check: FrameCheck = plausible_response,
        max_frame: int = DEFAULT_MAX_FRAME,
        bucket: Bucket | None = None,
        segment_filter: Callable[[TcpSegment], bool] | None = None,
        on_malformed: Callable[[DecodeError], None] | None = None,
    ) -> None:
        self.reader = CaptureReader(fileobj)
        self.decoder = TcpDecoder()
        self.extractor = FrameExtractor(
            ports=ports,
            classifier=classifier,
            request_check=request_check,
            response_check=response_check,
            max_frame=max_frame,
        )
        self.bucket = bucket if bucket is not None and bucket.count > 1 else None
        self.segment_filter = segment_filter
        self.on_malformed = on_malformed
        self.packets = 0
        self.truncated_offset: int | None = None

    def items(self) -> Iterator[Frame | FlowEnd]:
        """Frames and flow ends of the whole file (see the module rules)."""
        try:
            yield from self._packets()
        except DecodeError as exc:
            if self.on_malformed is None:
                raise
            self.on_malformed(exc)
        if self.reader.truncated:
            self.truncated_offset = self.reader.truncated_offset or 0
        yield from self.extractor.flush()

    def _packets(self) -> Iterator[Frame | FlowEnd]:
        decode = self.decoder.decode
        feed = self.extractor.feed
        keep = self.segment_filter
        bucket = self.bucket
        if bucket is None:
            for ts, linktype, data, _caplen, _origlen, index in self.reader.records():
                self.packets += 1
                seg = decode(linktype, data, ts, index)
                if seg is None or (keep is not None and not keep(seg)):
                    continue
                out = feed(seg)
                if out:
                    yield from out
            return
        mine, count = bucket.index, bucket.count
        cache: dict[tuple[str, int, str, int], int] = {}
        # Raw (addresses, ports) bytes of plain Ethernet/IPv4/TCP packets -> mine?
        raw_mine: dict[bytes, bool] = {}
        for ts, linktype, data, _caplen, _origlen, index in self.reader.records():
            self.packets += 1
            raw: bytes | None = None
            # Ethernet, ethertype IPv4, version 4 with a 20-byte header, protocol TCP,
            # not a fragment: addresses at 26..34 and ports at 34..38.
            if (
                linktype == LINKTYPE_ETHERNET
                and len(data) >= 38
                and data[12:14] == ETHERTYPE_IPV4
                and data[14] == 0x45
                and data[23] == TCP_OVER_IPV4_KEY
                and not (data[20] & 0x3F or data[21])
            ):
                raw = data[26:38]
                if raw_mine.get(raw) is False:
                    continue
            seg = decode(linktype, data, ts, index)
            if seg is None or (keep is not None and not keep(seg)):
                continue
            key = (seg.src, seg.sport, seg.dst, seg.dport)
            b = cache.get(key)
            if b is None:
                if len(cache) > _BUCKET_CACHE_MAX:
                    cache.clear()
                    raw_mine.clear()
                b = cache[key] = bucket_of(*key, count)
            if raw is not None:
                raw_mine[raw] = b == mine
            if b != mine:
                continue
            out = feed(seg)
            if out:
                yield from out


def iter_frames(
    fileobj: BinaryIO,
    *,
    ports: Iterable[int] | None = None,
    classifier: Classifier = looks_like_request,
    request_check: FrameCheck = plausible_request,
    response_check: FrameCheck = plausible_response,
    max_frame: int = DEFAULT_MAX_FRAME,
    segment_filter: Callable[[TcpSegment], bool] | None = None,
    on_truncated: Callable[[int], None] | None = None,
) -> Iterator[Frame | FlowEnd]:
    """Stream frames (and a :class:`FlowEnd` per connection) out of a capture file,
    through the one :class:`CapturePipeline`.

    ``segment_filter`` may drop segments early (for example other ports' traffic).
    ``on_truncated`` is called with the file offset when the file ends inside a record
    (the capture was cut short); everything before it is still decoded.
    Raises :class:`~kraft_jbod.errors.DecodeError` for a malformed capture file.
    """
    pipe = CapturePipeline(
        fileobj,
        ports=ports,
        classifier=classifier,
        request_check=request_check,
        response_check=response_check,
        max_frame=max_frame,
        segment_filter=segment_filter,
    )
    items = pipe.items()
    for item in items:
        if pipe.truncated_offset is not None and on_truncated is not None:
            on_truncated(pipe.truncated_offset)
            on_truncated = None
        yield item
    if pipe.truncated_offset is not None and on_truncated is not None:
        on_truncated(pipe.truncated_offset)


def iter_flows(fileobj: BinaryIO, **options: object) -> Iterator[Flow]:
    """Yield each connection as a :class:`Flow` with all its frames, when it closes.

    Memory holds the frames of open connections only. ``options`` are those of
    :func:`iter_frames`.
    """
    open_flows: dict[str, list[Frame]] = {}
    for item in iter_frames(fileobj, **options):  # type: ignore[arg-type]
        if isinstance(item, Frame):
            open_flows.setdefault(item.connection_id, []).append(item)
        else:
            flow = item.flow
            flow.frames = open_flows.pop(flow.connection_id, [])
            yield flow


def read_flows(fileobj: BinaryIO, **options: object) -> list[Flow]:
    """All flows of a capture (holds every frame in memory; see :func:`iter_flows`)."""
    return list(iter_flows(fileobj, **options))
