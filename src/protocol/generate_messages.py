#!/usr/bin/env python3
"""Writes src/protocol/messages.hpp and messages.cpp from Kafka's JSON message schemas.

Run by hand when the set of messages changes, never by the build:

    python3 src/protocol/generate_messages.py ../shared/kafka-protocol src/protocol

The output is committed. It is kgroup's own code: typed structs plus encode/decode functions
in the style of src/protocol/primitives.hpp. Only the schemas' structure (field order, types,
version ranges, defaults) is used; their prose is not copied.
"""
import json
import os
import re
import sys
import textwrap

# Message files and the version range kgroup supports for each (issue 2).
MESSAGES = [
    ("ApiVersions", 0, 4),
    ("Metadata", 1, 13),
    ("FindCoordinator", 0, 6),
    ("JoinGroup", 0, 9),
    ("SyncGroup", 0, 5),
    ("Heartbeat", 0, 4),
    ("LeaveGroup", 0, 5),
    ("OffsetCommit", 2, 9),
    ("OffsetFetch", 1, 9),
    ("ListOffsets", 1, 10),
    ("Fetch", 4, 17),
    ("OffsetForLeaderEpoch", 2, 4),
    ("DescribeGroups", 0, 5),
    ("SaslHandshake", 0, 1),
    ("SaslAuthenticate", 0, 2),
    # KIP-848, the consumer group protocol (issue 16).
    ("ConsumerGroupHeartbeat", 0, 1),
    ("ConsumerGroupDescribe", 0, 0),
    # KIP-932, share groups (issue 34): v0 (Kafka 4.0's early access) is gone from brokers.
    ("ShareGroupHeartbeat", 1, 1),
    ("ShareGroupDescribe", 1, 1),
    ("ShareFetch", 1, 2),
    ("ShareAcknowledge", 1, 2),
    # KIP-714, client telemetry (issue 35).
    ("GetTelemetrySubscriptions", 0, 0),
    ("PushTelemetry", 0, 0),
]
DATA = [("ConsumerProtocolSubscription", 0, 3), ("ConsumerProtocolAssignment", 0, 3)]

# Versions newer than the schemas of ../shared/kafka-protocol (October 2024), from the protocol's
# published definitions (structure only): per schema, its new validVersions and the top-level
# fields to append.
AMENDMENTS = {
    # KIP-1102 (Kafka 4.0): Metadata v13 answers carry a top-level ErrorCode (REBOOTSTRAP_REQUIRED);
    # the request is v12's.
    "MetadataRequest": {"validVersions": "0-13"},
    "MetadataResponse": {
        "validVersions": "0-13",
        "append": [{"name": "ErrorCode", "type": "int16", "versions": "13+", "ignorable": True}],
    },
}

NEVER = 1 << 15


def load(path):
    text = open(path).read()
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
    js = json.loads(text)
    amend = AMENDMENTS.get(js.get("name"), {})
    if "validVersions" in amend:
        js["validVersions"] = amend["validVersions"]
    js["fields"] = js["fields"] + amend.get("append", [])
    return js


def vrange(spec):
    """'3+', '0-2', '5', 'none' -> (lo, hi) inclusive; (NEVER, -1) for none."""
    if spec is None or spec == "none":
        return (NEVER, -1)
    if spec.endswith("+"):
        return (int(spec[:-1]), NEVER)
    if "-" in spec:
        a, b = spec.split("-")
        return (int(a), int(b))
    return (int(spec), int(spec))


def snake(name):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


def cond(r, var="v"):
    lo, hi = r
    if lo == NEVER:
        return "false"
    parts = []
    if lo > 0:
        parts.append(f"{var} >= {lo}")
    if hi != NEVER:
        parts.append(f"{var} <= {hi}")
    return " && ".join(parts) if parts else "true"


PRIM = {
    "int8": "std::int8_t", "int16": "std::int16_t", "uint16": "std::uint16_t",
    "int32": "std::int32_t", "uint32": "std::uint32_t", "int64": "std::int64_t",
    "float64": "double", "bool": "bool", "string": "std::string", "bytes": "bytes",
    "uuid": "uuid", "records": "std::optional<records_view>",
}
MIN_SIZE = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
            "float64": 8, "bool": 1, "uuid": 16, "string": 1, "bytes": 1}


class Field:
    def __init__(self, js, parent):
        self.js = js
        self.name = snake(js["name"])
        self.kname = js["name"]
        t = js["type"]
        self.is_array = t.startswith("[]")
        self.elem = t[2:] if self.is_array else t
        self.is_struct = self.elem not in PRIM
        self.versions = vrange(js.get("versions"))
        self.nullable = vrange(js.get("nullableVersions"))
        self.tagged = vrange(js.get("taggedVersions")) if "tag" in js else (NEVER, -1)
        self.tag = js.get("tag")
        self.ignorable = js.get("ignorable", False)
        self.default = js.get("default")
        self.struct = None
        if self.is_struct:
            self.struct = parent.find_or_make(self.elem, js.get("fields"))

    @property
    def can_be_null(self):
        return self.nullable[0] != NEVER

    def elem_cpp(self):
        if self.is_struct:
            return self.struct.cpp_name
        return PRIM[self.elem]

    def cpp_type(self):
        if self.elem == "records":
            return PRIM["records"]
        if self.is_array:
            t = f"std::vector<{self.elem_cpp()}>"
        else:
            t = self.elem_cpp()
        if self.can_be_null:
            t = f"std::optional<{t}>"
        return t

    def default_expr(self):
        d = self.default
        if self.elem == "records":
            return None
        if self.can_be_null and d == "null":
            return "std::nullopt"
        if self.is_array or self.is_struct:
            return "std::in_place" if self.can_be_null else None
        if self.elem == "bool":
            return "true" if d == "true" else None if d in (None, "false") else None
        if self.elem == "string":
            if d:
                return json.dumps(d)
            return "std::string{}" if self.can_be_null else None
        if self.elem in ("bytes", "uuid"):
            return "bytes{}" if (self.can_be_null and self.elem == "bytes") else None
        if d is None:
            return "0"
        v = int(str(d), 0)
        if v == -2147483648:
            return "std::numeric_limits<std::int32_t>::min()"
        return str(v)


class Struct:
    def __init__(self, kname, fields_js, registry, top=False, common=None):
        self.kname = kname
        self.cpp_name = snake(kname)
        self.registry = registry
        self.children = []
        self.top = top
        self.fields = []
        registry[kname] = self
        # A schema's commonStructs (KIP-848's TopicPartitions, ...): nested types of the message,
        # known before any field names them.
        # Named with "_t": fields of that name appear at any depth (KIP-848's
        # Assignment.TopicPartitions), and a member may not share its type's name.
        for c in common or []:
            st = Struct(c["name"], c["fields"], registry)
            st.cpp_name += "_t"
            self.children.append(st)
        for f in fields_js or []:
            self.fields.append(Field(f, self))
        names = {f.name for f in self.fields}
        for c in self.children:
            if c.cpp_name in names:
                c.cpp_name += "_t"

    def find_or_make(self, kname, fields_js):
        if fields_js is None:
            return self.registry[kname]
        s = Struct(kname, fields_js, self.registry)
        self.children.append(s)
        return s


def emit_struct_decl(s, out, indent, extra=None):
    pad = " " * indent
    out.append(f"{pad}struct {s.cpp_name} {{")
    for line in extra or []:
        out.append(f"{pad}  {line}")
    for c in s.children:
        emit_struct_decl(c, out, indent + 2)
    for f in s.fields:
        d = f.default_expr()
        if d is None:
            init = "{}"
        elif d == "std::in_place":
            init = "{std::in_place}"
        else:
            init = f" = {d}"
        out.append(f"{pad}  {f.cpp_type()} {f.name}{init};")
    out.append(f"{pad}  bool operator==(const {s.cpp_name}&) const = default;")
    out.append(f"{pad}}};")


def qualified(s, top):
    """C++ qualified name of a nested struct."""
    path = []
    def walk(node, trail):
        if node is s:
            path.extend(trail + [node.cpp_name])
            return True
        return any(walk(c, trail + [node.cpp_name]) for c in node.children)
    walk(top, [])
    return "::".join(path)


def all_structs(s):
    yield s
    for c in s.children:
        yield from all_structs(c)


def is_default_expr(f, val):
    d = f.default_expr()
    if f.elem == "records":
        return f"!{val}.has_value()"
    if f.is_array or f.is_struct:
        if f.can_be_null and d == "std::nullopt":
            return f"!{val}.has_value()"
        if f.is_array:
            if f.can_be_null:
                return f"({val}.has_value() && {val}->empty())"
            return f"{val}.empty()"
        if f.can_be_null:
            return f"({val}.has_value() && *{val} == decltype({val})::value_type{{}})"
        return f"{val} == decltype({val}){{}}"
    if f.elem == "string":
        if d == "std::nullopt":
            return f"!{val}.has_value()"
        if f.can_be_null:
            return f"({val}.has_value() && {val}->empty())" if d in (None, "std::string{}") else f"({val} == std::string({d}))"
        return f"{val}.empty()" if d is None else f"{val} == {d}"
    if f.elem == "bytes":
        if d == "std::nullopt":
            return f"!{val}.has_value()"
        if f.can_be_null:
            return f"({val}.has_value() && {val}->empty())"
        return f"{val}.empty()"
    if f.elem == "uuid":
        return f"{val}.is_zero()"
    if f.elem == "bool":
        return f"{val} == {'true' if d == 'true' else 'false'}"
    return f"{val} == {d}"


def in_range(v, r):
    lo, hi = r
    return lo != NEVER and lo <= v and (hi == NEVER or v <= hi)


def field_min_size(f, v, flex, flex_range):
    """Fewest bytes a present, non-tagged field can take on the wire at version v."""
    if f.is_array or f.elem in ("bytes", "records"):
        return 1 if flex else 4          # (compact) length; null or empty
    if f.elem == "string":
        return 1 if flex else 2
    if f.is_struct:
        if in_range(v, f.nullable):
            return 1                     # int8 null marker
        return struct_min_size(f.struct, v, flex_range)
    return MIN_SIZE[f.elem]


def struct_min_size(s, v, flex_range):
    """Fewest bytes an instance of s takes at version v (tagged fields are optional)."""
    flex = in_range(v, flex_range)
    n = 1 if flex else 0                 # tagged-field count
    for f in s.fields:
        if f.tag is None and in_range(v, f.versions):
            n += field_min_size(f, v, flex, flex_range)
    return n


def by_version_expr(values):
    """[(version, value)] -> a C++ expression of v picking the value (versions ascending)."""
    ranges = []
    for ver, val in values:
        if ranges and ranges[-1][2] == val:
            ranges[-1][1] = ver
        else:
            ranges.append([ver, ver, val])
    expr = str(ranges[-1][2])
    for lo, hi, val in reversed(ranges[:-1]):
        expr = f"v <= {hi} ? {val} : {expr}"
    return expr if len(ranges) == 1 else f"({expr})"


def elem_min_size_expr(f, ctx, flex):
    """Lower bound on one array element's encoded size, so a hostile count is rejected before
    anything is allocated (read_array_length bounds the count by remaining / this)."""
    lo, hi, flex_range = ctx
    if f.is_struct:
        vals = [(v, max(1, struct_min_size(f.struct, v, flex_range))) for v in range(lo, hi + 1)]
        return by_version_expr(vals)
    if f.elem == "string":
        return "1" if flex == "true" else f"({flex} ? 1 : 2)"
    if f.elem == "bytes":
        return "1" if flex == "true" else f"({flex} ? 1 : 4)"
    return str(MIN_SIZE[f.elem])


def write_value(f, val, flex, out, pad, top, w="w"):
    """Emit code writing one (non-null) element of f's element type with writer `w`."""
    e = f.elem
    if f.is_struct:
        out.append(f"{pad}encode_{struct_fn(f.struct, top)}({w}, {val}, v);")
    elif e in ("string", "bytes"):
        out.append(f"{pad}{w}.write_{e}({val}, {flex});")
    else:
        out.append(f"{pad}{w}.write_{e}({val});")


def read_value(f, dst, flex, out, pad, top, r="r"):
    """Emit code reading one (non-null) element of f's element type with reader `r`."""
    e = f.elem
    if f.is_struct:
        out.append(f"{pad}decode_{struct_fn(f.struct, top)}({r}, {dst}, v);")
    elif e in ("string", "bytes"):
        out.append(f"{pad}{dst} = {r}.read_{e}({flex});")
    else:
        out.append(f"{pad}{dst} = {r}.read_{e}();")


def struct_fn(s, top):
    return qualified(s, top).replace("::", "__")


def emit_field_write(f, out, pad, top, flex="flex", w="w"):
    val = f"m.{f.name}"
    nullable_now = cond(f.nullable)
    null_check = f"{w}.fail(codec_errc::null_not_allowed, \"{f.kname}\");"
    if f.elem == "records":
        out.append(f"{pad}if (!{val} && !({nullable_now})) {null_check}")
        out.append(f"{pad}{w}.write_records({val}, {flex});")
        return
    if f.is_array:
        if f.can_be_null:
            out.append(f"{pad}if (!{val}) {{")
            out.append(f"{pad}  if (!({nullable_now})) {null_check}")
            out.append(f"{pad}  {w}.write_array_length(-1, {flex});")
            out.append(f"{pad}}} else {{")
            inner = f"(*{val})"
            p2 = pad + "  "
        else:
            inner = val
            p2 = pad
        out.append(f"{p2}{w}.write_array_length(static_cast<std::int32_t>({inner}.size()), {flex});")
        out.append(f"{p2}for (const auto& e : {inner}) {{")
        write_value(f, "e", flex, out, p2 + "  ", top, w)
        out.append(f"{p2}}}")
        if f.can_be_null:
            out.append(f"{pad}}}")
        return
    if f.can_be_null:
        if f.elem in ("string", "bytes"):
            out.append(f"{pad}if (!{val} && !({nullable_now})) {null_check}")
            out.append(f"{pad}{w}.write_nullable_{f.elem}({val}, {flex});")
        elif f.is_struct:
            # Nullable struct: int8 -1 for null, 1 then the struct otherwise.
            out.append(f"{pad}if (!{val}) {{")
            out.append(f"{pad}  if (!({nullable_now})) {null_check}")
            out.append(f"{pad}  {w}.write_int8(-1);")
            out.append(f"{pad}}} else {{")
            out.append(f"{pad}  {w}.write_int8(1);")
            out.append(f"{pad}  encode_{struct_fn(f.struct, top)}({w}, *{val}, v);")
            out.append(f"{pad}}}")
        else:
            raise SystemExit(f"unsupported nullable {f.elem}")
        return
    write_value(f, val, flex, out, pad, top, w)


def emit_field_read(f, out, pad, top, ctx, flex="flex", r="r"):
    dst = f"m.{f.name}"
    nullable_now = cond(f.nullable)
    null_check = f"if (!{dst} && {r}.ok() && !({nullable_now})) {r}.fail(codec_errc::null_not_allowed, \"{f.kname}\");"
    if f.elem == "records":
        out.append(f"{pad}{dst} = {r}.read_records({flex});")
        out.append(f"{pad}{null_check}")
        return
    if f.is_array:
        minsize = elem_min_size_expr(f, ctx, flex)
        nl = nullable_now if f.can_be_null else "false"
        out.append(f"{pad}{{")
        out.append(f"{pad}  const std::int32_t n = {r}.read_array_length({flex}, {nl}, {minsize});")
        if f.can_be_null:
            out.append(f"{pad}  if (n < 0) {{ {dst}.reset(); }} else {{")
            out.append(f"{pad}    auto& vec = {dst}.emplace();")
        else:
            out.append(f"{pad}  {{")
            out.append(f"{pad}    auto& vec = {dst};")
            out.append(f"{pad}    vec.clear();")
        out.append(f"{pad}    reserve_for(vec, {r}, n);")
        out.append(f"{pad}    for (std::int32_t i = 0; i < n && {r}.ok(); ++i) {{")
        out.append(f"{pad}      auto& e = vec.emplace_back();")
        read_value(f, "e", flex, out, pad + "      ", top, r)
        out.append(f"{pad}    }}")
        out.append(f"{pad}  }}")
        out.append(f"{pad}}}")
        return
    if f.can_be_null:
        if f.elem == "string":
            # Lenient like reader::read_string: a null where this version does not allow one
            # reads as "" (librdkafka's mock sends null strings in error responses).
            out.append(f"{pad}{dst} = {r}.read_nullable_string({flex});")
            out.append(f"{pad}if (!{dst} && !({nullable_now})) {dst} = std::string();")
        elif f.elem == "bytes":
            out.append(f"{pad}{dst} = {r}.read_nullable_bytes({flex});")
            out.append(f"{pad}if (!{dst} && !({nullable_now})) {dst} = bytes();")
        elif f.is_struct:
            out.append(f"{pad}if ({r}.read_int8() < 0) {{")
            out.append(f"{pad}  {dst}.reset();")
            out.append(f"{pad}  {null_check}")
            out.append(f"{pad}}} else {{")
            # emplace(T{}), not emplace(): clang decides a nested struct with member initializers
            # is not default-constructible while its enclosing struct is being defined (where
            # std::optional<T> is first instantiated), and keeps that answer.
            out.append(f"{pad}  decode_{struct_fn(f.struct, top)}({r}, {dst}.emplace(std::remove_reference_t<decltype(*{dst})>{{}}), v);")
            out.append(f"{pad}}}")
        else:
            raise SystemExit(f"unsupported nullable {f.elem}")
        return
    read_value(f, dst, flex, out, pad, top, r)


def tagged_present(f):
    """C++ condition: the tagged field f exists at version v (tagged and within its versions)."""
    (a, b), (c, d) = f.tagged, f.versions
    lo, hi = max(a, c), min(b, d)
    return "false" if lo == NEVER or lo > hi else cond((lo, hi))


def emit_struct_codec(s, top, flex_range, out, lo, hi):
    qn = qualified(s, top)
    fn = struct_fn(s, top)
    flex_cond = cond(flex_range)
    ctx = (lo, hi, flex_range)
    tagged = [f for f in s.fields if f.tag is not None]
    # encode
    out.append(f"void encode_{fn}(writer& w, const {qn}& m, std::int16_t v) {{")
    out.append(f"  [[maybe_unused]] const bool flex = {flex_cond};")
    for f in s.fields:
        if f.tag is not None:
            continue
        out.append(f"  if ({cond(f.versions)}) {{")
        emit_field_write(f, out, "    ", top)
        if not f.ignorable:
            out.append(f"  }} else if (!({is_default_expr(f, 'm.' + f.name)})) {{")
            out.append(f"    w.fail(codec_errc::field_not_supported, \"{s.kname}.{f.kname}\");")
        out.append("  }")
    # A non-ignorable tagged field is as binding as any other: a non-default value at a version
    # that cannot carry it is an error, not a silent drop.
    for f in tagged:
        if not f.ignorable:
            out.append(f"  if (!({tagged_present(f)}) && !({is_default_expr(f, 'm.' + f.name)})) {{")
            out.append(f"    w.fail(codec_errc::field_not_supported, \"{s.kname}.{f.kname}\");")
            out.append("  }")
    out.append("  if (flex) {")
    if not tagged:
        out.append("    w.write_uvarint(0);")
    else:
        out.append("    std::uint32_t count = 0;")
        for f in tagged:
            out.append(f"    const bool put_{f.name} = ({tagged_present(f)}) && !({is_default_expr(f, 'm.' + f.name)});")
            out.append(f"    count += put_{f.name} ? 1 : 0;")
        out.append("    w.write_uvarint(count);")
        # Tags go out in ascending order.
        for f in sorted(tagged, key=lambda x: x.tag):
            out.append(f"    if (put_{f.name}) {{")
            out.append(f"      bytes tmp;")
            out.append(f"      writer tw(tmp);")
            emit_field_write(f, out, "      ", top, flex="true", w="tw")
            out.append(f"      if (!tw.ok()) w.fail(tw.error(), tw.error_field());")
            out.append(f"      w.write_uvarint({f.tag});")
            out.append(f"      w.write_uvarint(static_cast<std::uint32_t>(tmp.size()));")
            out.append(f"      w.write_raw(tmp);")
            out.append("    }")
    out.append("  }")
    # unused-parameter silence for structs without version-dependent code
    out.append("  (void)v;")
    out.append("}")
    out.append("")
    # decode
    out.append(f"void decode_{fn}(reader& r, {qn}& m, std::int16_t v) {{")
    out.append(f"  [[maybe_unused]] const bool flex = {flex_cond};")
    for f in s.fields:
        if f.tag is not None:
            continue
        out.append(f"  if ({cond(f.versions)}) {{")
        emit_field_read(f, out, "    ", top, ctx)
        out.append("  }")
    out.append("  if (flex && r.ok()) {")
    if not tagged:
        out.append("    skip_tagged_fields(r);")
    else:
        out.append("    const std::uint32_t count = r.read_uvarint();")
        out.append("    if (count > r.remaining()) r.fail(codec_errc::oversized, \"tagged fields\");")
        out.append("    for (std::uint32_t i = 0; i < count && r.ok(); ++i) {")
        out.append("      const std::uint32_t tag = r.read_uvarint();")
        out.append("      const std::uint32_t size = r.read_uvarint();")
        out.append("      if (!r.ok()) break;")
        out.append("      if (size > r.remaining()) { r.fail(codec_errc::oversized, \"tagged field\"); break; }")
        out.append("      reader tr(r.read_raw(size));")
        out.append("      switch (tag) {")
        for f in tagged:
            out.append(f"        case {f.tag}:")
            out.append(f"          if ({tagged_present(f)}) {{")
            emit_field_read(f, out, "            ", top, ctx, flex="true", r="tr")
            out.append("            if (!tr.ok()) r.fail(tr.error(), tr.error_field());")
            out.append(f"            else if (tr.remaining() != 0) r.fail(codec_errc::bad_tagged_field, \"{s.kname}.{f.kname}\");")
            out.append("          }")
            out.append("          break;")
        out.append("        default:")
        out.append("          break;  // unknown tags are skipped, as the protocol allows")
        out.append("      }")
        out.append("    }")
    out.append("  }")
    out.append("  (void)v;")
    out.append("}")
    out.append("")


def main():
    src, dst = sys.argv[1], sys.argv[2]
    hdr = []
    cpp = []
    protos = []
    hdr.append("// Generated by src/protocol/generate_messages.py from Kafka's message schemas. Do not edit.")
    hdr.append("// One struct per request, response and consumer-protocol message, for the versions kgroup")
    hdr.append("// supports (lowest_version..highest_version). Fields absent from a version keep their default.")
    hdr.append("#pragma once")
    hdr.append("")
    hdr.append("#include <cstdint>")
    hdr.append("#include <limits>")
    hdr.append("#include <optional>")
    hdr.append("#include <span>")
    hdr.append("#include <string>")
    hdr.append("#include <system_error>")
    hdr.append("#include <vector>")
    hdr.append("")
    hdr.append('#include "protocol/primitives.hpp"')
    hdr.append("")
    hdr.append("namespace kgroup::protocol {")
    hdr.append("")
    for base, lo, hi in MESSAGES:
        hdr.append(f"struct {snake(base)}_request;")
        hdr.append(f"struct {snake(base)}_response;")
    hdr.append("")
    cpp.append("// Generated by src/protocol/generate_messages.py from Kafka's message schemas. Do not edit.")
    cpp.append('#include "protocol/messages.hpp"')
    cpp.append("")
    cpp.append("namespace kgroup::protocol {")
    cpp.append("namespace {")
    cpp.append("")
    decls = []
    pub = []

    items = []
    for base, lo, hi in MESSAGES:
        for kind in ("Request", "Response"):
            items.append((base + kind, lo, hi, kind))
    for name, lo, hi in DATA:
        items.append((name, lo, hi, "Data"))

    for name, lo, hi, kind in items:
        js = load(os.path.join(src, name + ".json"))
        registry = {}
        top = Struct(js["name"], js["fields"], registry, top=True, common=js.get("commonStructs"))
        flex = vrange(js.get("flexibleVersions"))
        svlo, svhi = vrange(js["validVersions"])
        assert svlo <= lo and hi <= svhi, name
        extra = []
        if "apiKey" in js:
            extra.append(f"static constexpr std::int16_t api_key = {js['apiKey']};")
        extra.append(f"static constexpr std::int16_t lowest_version = {lo};")
        extra.append(f"static constexpr std::int16_t highest_version = {hi};")
        fl = flex[0] if flex[0] != NEVER else -1
        extra.append(f"/// First flexible (compact, tagged) version, or -1 if none.")
        extra.append(f"static constexpr std::int16_t first_flexible_version = {fl};")
        extra.append(f"static constexpr const char* name = \"{js['name']}\";")
        if kind == "Request":
            extra.append(f"using response_type = {snake(js['name'][:-7])}_response;")
        emit_struct_decl(top, hdr, 0, extra)
        hdr.append("")
        pub.append(f"/// Appends the body of `m` at `version` to `out`; fails for versions or values it cannot carry.")
        pub.append(f"std::error_code encode(const {top.cpp_name}& m, std::int16_t version, bytes& out);")
        pub.append(f"/// Decodes a complete body. Bytes after the last field are an error, unless `trailing` is")
        pub.append(f"/// given: then they are accepted and counted there (Kafka's own readers stop after the")
        pub.append(f"/// last field too).")
        pub.append(f"std::error_code decode(std::span<const std::uint8_t> in, std::int16_t version, {top.cpp_name}& m,")
        pub.append(f"                       std::size_t* trailing = nullptr);")
        structs = list(all_structs(top))
        for s in structs:
            decls.append(f"void encode_{struct_fn(s, top)}(writer& w, const {qualified(s, top)}& m, std::int16_t v);")
            decls.append(f"void decode_{struct_fn(s, top)}(reader& r, {qualified(s, top)}& m, std::int16_t v);")
        body = []
        for s in structs:
            emit_struct_codec(s, top, flex, body, lo, hi)
        protos.append((top, body, lo, hi))

    hdr.extend(pub)
    hdr.append("")
    hdr.append("}  // namespace kgroup::protocol")
    cpp.extend(decls)
    cpp.append("")
    for top, body, lo, hi in protos:
        cpp.extend(body)
    cpp.append("}  // namespace")
    cpp.append("")
    for top, body, lo, hi in protos:
        n = top.cpp_name
        fn = struct_fn(top, top)
        cpp.append(f"std::error_code encode(const {n}& m, std::int16_t version, bytes& out) {{")
        cpp.append(f"  if (version < {n}::lowest_version || version > {n}::highest_version) return codec_errc::unsupported_version;")
        cpp.append("  const std::size_t start = out.size();")
        cpp.append("  writer w(out);")
        cpp.append(f"  encode_{fn}(w, m, version);")
        cpp.append("  if (!w.ok()) { out.resize(start); return w.error(); }")
        cpp.append("  return {};")
        cpp.append("}")
        cpp.append("")
        cpp.append(f"std::error_code decode(std::span<const std::uint8_t> in, std::int16_t version, {n}& m,")
        cpp.append(f"                       std::size_t* trailing) {{")
        cpp.append(f"  if (version < {n}::lowest_version || version > {n}::highest_version) return codec_errc::unsupported_version;")
        cpp.append("  reader r(in);")
        cpp.append(f"  m = {n}{{}};")
        cpp.append(f"  decode_{fn}(r, m, version);")
        cpp.append("  if (!r.ok()) return r.error();")
        cpp.append("  if (trailing != nullptr) *trailing = r.remaining();")
        cpp.append("  else if (r.remaining() != 0) return codec_errc::trailing_bytes;")
        cpp.append("  return {};")
        cpp.append("}")
        cpp.append("")
    cpp.append("}  // namespace kgroup::protocol")
    open(os.path.join(dst, "messages.hpp"), "w").write("\n".join(hdr) + "\n")
    open(os.path.join(dst, "messages.cpp"), "w").write("\n".join(cpp) + "\n")


# kgroup's reaction classes (src/protocol/error_reactions.hpp), one row per code beside Kafka's
# own retriable flag, so every layer classifies a code the same way. Not Kafka's data: the
# reactions of the Java client's coordinators and fetcher, as docs/DESIGN.md tables them.
REACTIONS = {
    # The coordinator moved or is down: forget it, rediscover, retry.
    "NOT_COORDINATOR": ["coordinator_moved"],
    "COORDINATOR_NOT_AVAILABLE": ["coordinator_moved"],
    # The coordinator is loading the group: retry it after a backoff.
    "COORDINATOR_LOAD_IN_PROGRESS": ["coordinator_busy"],
    # The coordinator no longer knows this member or its generation/epoch: partitions lost, rejoin.
    "UNKNOWN_MEMBER_ID": ["fenced"],
    "ILLEGAL_GENERATION": ["fenced"],
    "FENCED_MEMBER_EPOCH": ["fenced"],
    # The membership cannot go on: raised from poll().
    "FENCED_INSTANCE_ID": ["group_fatal"],
    "GROUP_AUTHORIZATION_FAILED": ["group_fatal"],
    "INCONSISTENT_GROUP_PROTOCOL": ["group_fatal"],
    "GROUP_MAX_SIZE_REACHED": ["group_fatal"],
    "INVALID_SESSION_TIMEOUT": ["group_fatal"],
    "INVALID_GROUP_ID": ["group_fatal"],
    "UNSUPPORTED_VERSION": ["group_fatal"],
    "UNRELEASED_INSTANCE_ID": ["group_fatal"],
    "UNSUPPORTED_ASSIGNOR": ["group_fatal"],
    "INVALID_REGULAR_EXPRESSION": ["group_fatal"],
    # The partition's leader or the topic changed: refresh metadata before the next try.
    "NOT_LEADER_OR_FOLLOWER": ["refresh_metadata"],
    "UNKNOWN_TOPIC_OR_PARTITION": ["refresh_metadata"],
    "LEADER_NOT_AVAILABLE": ["refresh_metadata"],
    "FENCED_LEADER_EPOCH": ["refresh_metadata"],
    "UNKNOWN_LEADER_EPOCH": ["refresh_metadata"],
    "REPLICA_NOT_AVAILABLE": ["refresh_metadata"],
    "KAFKA_STORAGE_ERROR": ["refresh_metadata"],
    "OFFSET_NOT_AVAILABLE": ["refresh_metadata"],
    "UNKNOWN_TOPIC_ID": ["refresh_metadata"],
    # A commit or committed-offsets lookup refused for now: commit_sync()/committed() try again
    # (as Java): a partition-level timeout, a pending transactional commit (KIP-447), and a
    # KIP-848 member epoch behind the coordinator's (the retry carries the latest one).
    "REQUEST_TIMED_OUT": ["retry_commit"],
    "UNSTABLE_OFFSET_COMMIT": ["retry_commit"],
    "STALE_MEMBER_EPOCH": ["retry_commit"],
}


def errors(src, root):
    """Writes the public error-code enum and the private code/name/retriable/reactions/message table."""
    rows = []
    for line in open(os.path.join(src, "errors.tsv")).read().splitlines()[1:]:
        code, name, retr, msg = line.split("\t")
        rows.append((int(code), name, retr == "retriable", msg))
    enum = ["/// \\file",
            "/// Kafka's protocol error codes. Generated by src/protocol/generate_messages.py from Kafka's",
            "/// error code table. Do not edit. Included by kgroup/error.hpp.",
            "#pragma once", "", "#include <cstdint>", "",
            "namespace kgroup {", "",
            "/// Kafka protocol error codes, as brokers send them (ErrorCode fields). Each value's comment is",
            "/// Kafka's description (also its kafka_category() message()); \"Retriable\" marks the codes",
            "/// Kafka's table calls retriable (is_retriable()). What kgroup does with each:",
            "/// [Handling errors](../../docs/errors.md).",
            "enum class kafka_errc : std::int16_t {"]
    for code, name, retr, msg in rows:
        # Kafka's description as the value's documentation, wrapped to the project's width.
        text = msg + (" Retriable." if retr else "")
        enum += textwrap.wrap(text, width=100, initial_indent="  /// ", subsequent_indent="  /// ",
                              break_long_words=False, break_on_hyphens=False)
        enum.append(f"  {name.lower()} = {code},")
    enum += ["};", "", "}  // namespace kgroup"]
    open(os.path.join(root, "include/kgroup/kafka_errc.hpp"), "w").write("\n".join(enum) + "\n")
    names = {name for _, name, _, _ in rows}
    unknown = sorted(set(REACTIONS) - names)
    if unknown:
        raise SystemExit(f"REACTIONS names codes Kafka's table does not have: {unknown}")
    tab = ["// Generated by src/protocol/generate_messages.py from Kafka's error code table and the",
           "// script's REACTIONS. Do not edit.",
           "// {code, name, retriable, reactions, message}"]
    for code, name, r, msg in rows:
        reacts = " | ".join(f"reaction::{x}" for x in REACTIONS.get(name, [])) or "reaction::none"
        tab.append(f"{{{code}, {json.dumps(name)}, {'true' if r else 'false'}, {reacts}, {json.dumps(msg)}}},")
    open(os.path.join(root, "src/protocol/kafka_error_table.inc"), "w").write("\n".join(tab) + "\n")


if __name__ == "__main__":
    main()
    errors(sys.argv[1], os.path.join(sys.argv[2], "../.."))
