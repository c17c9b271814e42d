"""XSpace protobuf classes (tsl/profiler/protobuf/xplane.proto), built at import time.

Neither xprof nor jaxlib nor torch_xla ships a Python `xplane_pb2`, so the message types are declared here from
the .proto's field numbers (proto3, package tensorflow.profiler) in a private descriptor pool, so nothing else
that registers the same names can clash. Parsing then runs in protobuf's C (upb) implementation."""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_I64, _U64, _DBL, _STR, _BYTES, _MSG = (_F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_DOUBLE, _F.TYPE_STRING,
                                        _F.TYPE_BYTES, _F.TYPE_MESSAGE)
_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_PKG = "tensorflow.profiler"


def _msg(fd, name, fields, oneofs=()):
    m = fd.message_type.add(name=name)
    for o in oneofs:
        m.oneof_decl.add(name=o)
    for spec in fields:
        fname, num, ftype, label = spec[:4]
        f = m.field.add(name=fname, number=num, type=ftype, label=label)
        if ftype == _MSG:
            f.type_name = spec[4]
        if len(spec) > 5 and spec[5] is not None:
            f.oneof_index = spec[5]
    return m


def _map_entry(parent, entry_name, value_type):
    e = parent.nested_type.add(name=entry_name)
    e.options.map_entry = True
    e.field.add(name="key", number=1, type=_I64, label=_OPT)
    e.field.add(name="value", number=2, type=_MSG, label=_OPT, type_name=value_type)


def _build():
    fd = descriptor_pb2.FileDescriptorProto(name="ptxla_perf/xplane.proto", package=_PKG, syntax="proto3")
    _msg(fd, "XSpace", [("planes", 1, _MSG, _REP, f".{_PKG}.XPlane"), ("errors", 2, _STR, _REP),
                        ("warnings", 3, _STR, _REP), ("hostnames", 4, _STR, _REP)])
    plane = _msg(fd, "XPlane", [
        ("id", 1, _I64, _OPT), ("name", 2, _STR, _OPT), ("lines", 3, _MSG, _REP, f".{_PKG}.XLine"),
        ("event_metadata", 4, _MSG, _REP, f".{_PKG}.XPlane.EventMetadataEntry"),
        ("stat_metadata", 5, _MSG, _REP, f".{_PKG}.XPlane.StatMetadataEntry"),
        ("stats", 6, _MSG, _REP, f".{_PKG}.XStat")])
    _map_entry(plane, "EventMetadataEntry", f".{_PKG}.XEventMetadata")
    _map_entry(plane, "StatMetadataEntry", f".{_PKG}.XStatMetadata")
    _msg(fd, "XLine", [("id", 1, _I64, _OPT), ("display_id", 10, _I64, _OPT), ("name", 2, _STR, _OPT),
                       ("display_name", 11, _STR, _OPT), ("timestamp_ns", 3, _I64, _OPT),
                       ("duration_ps", 9, _I64, _OPT), ("events", 4, _MSG, _REP, f".{_PKG}.XEvent")])
    _msg(fd, "XEvent", [("metadata_id", 1, _I64, _OPT), ("offset_ps", 2, _I64, _OPT, None, 0),
                        ("num_occurrences", 5, _I64, _OPT, None, 0), ("duration_ps", 3, _I64, _OPT),
                        ("stats", 4, _MSG, _REP, f".{_PKG}.XStat")], oneofs=["data"])
    _msg(fd, "XStat", [("metadata_id", 1, _I64, _OPT), ("double_value", 2, _DBL, _OPT, None, 0),
                       ("uint64_value", 3, _U64, _OPT, None, 0), ("int64_value", 4, _I64, _OPT, None, 0),
                       ("str_value", 5, _STR, _OPT, None, 0), ("bytes_value", 6, _BYTES, _OPT, None, 0),
                       ("ref_value", 7, _U64, _OPT, None, 0)], oneofs=["value"])
    _msg(fd, "XEventMetadata", [("id", 1, _I64, _OPT), ("name", 2, _STR, _OPT), ("display_name", 4, _STR, _OPT),
                                ("metadata", 3, _BYTES, _OPT), ("stats", 5, _MSG, _REP, f".{_PKG}.XStat"),
                                ("child_id", 6, _I64, _REP)])
    _msg(fd, "XStatMetadata", [("id", 1, _I64, _OPT), ("name", 2, _STR, _OPT), ("description", 3, _STR, _OPT)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PKG}.{n}"))
            for n in ("XSpace", "XPlane", "XLine", "XEvent", "XStat", "XEventMetadata", "XStatMetadata")}


_CLASSES = _build()
XSpace = _CLASSES["XSpace"]
XPlane = _CLASSES["XPlane"]
XLine = _CLASSES["XLine"]
XEvent = _CLASSES["XEvent"]
XStat = _CLASSES["XStat"]


def parse_xspace(data: bytes):
    space = XSpace()
    space.ParseFromString(data)
    return space
