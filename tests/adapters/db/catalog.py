"""A database's schema as comparable text, one entry per object, and the drift between two.

What the migrations build is compared with what `supabase/schemas/` declares: every table,
column (type, default, nullability, position), constraint, index, view, sequence, function
(`pg_get_functiondef`), trigger, policy, grant (tables, columns, sequences, functions, schemas,
default privileges), row-level security flag, type and extension of every schema but Postgres'
own and the migrator's bookkeeping. A drift is told as the object, the schema file to change,
both versions, and, where it is mechanical, the statement a migration needs (as `supabase db
diff` would write it).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg

# Postgres' own schemas and the migrator's bookkeeping (only the migrated database has it).
IGNORED_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast", "supabase_migrations")


@dataclass(frozen=True)
class Entry:
    """One object: what it is (`kind`), its qualified `name`, the qualified name of what its
    definition lives with in the schema files (`anchor`: a column's table, a policy's table, a
    function itself), its comparable text, and the statement that creates it as it is here."""

    kind: str
    name: str
    anchor: str
    text: str
    statement: str | None = None

    @property
    def key(self) -> str:
        return f"{self.kind} {self.name}"


Catalog = dict[str, Entry]


def read(url: str) -> Catalog:
    """The catalog of the database at `url`. Names are schema-qualified (empty search_path)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("set search_path = ''")
        conn.execute(_GRANTS)
        row = conn.execute(
            "select array_agg(oid::int) from pg_namespace where nspname <> all(%s)"
            " and nspname not like 'pg\\_temp\\_%%' and nspname not like 'pg\\_toast\\_temp\\_%%'",
            (list(IGNORED_SCHEMAS),),
        ).fetchone()
        ns = row[0] if row else []
        entries: list[Entry] = []
        for reader in _READERS:
            entries.extend(reader(conn, ns))
    return {e.key: _with_create_table(e, entries) for e in entries}


def _with_create_table(entry: Entry, entries: list[Entry]) -> Entry:
    """A table's entry with its `create table` (columns in order, then constraints)."""
    if entry.kind != "table":
        return entry
    columns = sorted(
        (e for e in entries if e.kind == "column" and e.anchor == entry.name),
        key=lambda e: int(e.text.split(":", 1)[0].removeprefix("#")),
    )
    lines = [f"{e.name.rpartition('.')[2]} {e.text.partition(': ')[2]}" for e in columns]
    lines += [
        f"constraint {e.name.rpartition('.')[2]} {e.text}"
        for e in sorted(entries, key=lambda e: e.name)
        if e.kind == "constraint" and e.anchor == entry.name
    ]
    body = ",\n  ".join(lines)
    return replace(entry, statement=f"create table {entry.name} (\n  {body}\n);")


Conn = psycopg.Connection[tuple[Any, ...]]

# An ACL as `grantee: PRIVILEGE` items, in the session's own schema (no catalog shows it).
_GRANTS = """
create function pg_temp.grants(acl aclitem[]) returns text[]
language sql immutable
as $$
  select array_agg(
    case when x.grantee = 0 then 'public' else x.grantee::regrole::text end || ': '
    || x.privilege_type || case when x.is_grantable then ' (grantable)' else '' end)
  from aclexplode(acl) x
$$
"""

_RELKINDS = {"r": "table", "p": "table", "v": "view", "m": "materialized view", "f": "table"}


def _grants(acl: Sequence[str] | None) -> str:
    """`pg_temp.grants` (`grantee: PRIVILEGE` each) as one sorted line per grantee."""
    by_grantee: dict[str, list[str]] = {}
    for item in acl or ():
        grantee, _, privilege = item.partition(": ")
        by_grantee.setdefault(grantee, []).append(privilege)
    return "\n".join(f"{g}: {', '.join(sorted(p))}" for g, p in sorted(by_grantee.items()))


def _schemas(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select n.nspname, pg_temp.grants(coalesce(n.nspacl, acldefault('n', n.nspowner)))
        from pg_namespace n
        where n.oid = any(%(ns)s::oid[])
        """,
        {"ns": ns},
    ).fetchall()
    return [Entry("grants on schema", name, f"schema {name}", _grants(acl)) for name, acl in rows]


def _extensions(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        "select e.extname, n.nspname from pg_extension e"
        " join pg_namespace n on n.oid = e.extnamespace where e.extname <> 'plpgsql'"
    ).fetchall()
    return [
        Entry(
            "extension",
            name,
            name,
            f"in schema {schema}",
            f"create extension if not exists {name} with schema {schema};",
        )
        for name, schema in rows
    ]


def _relations(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select c.oid::regclass::text, c.relkind, c.relrowsecurity, c.relforcerowsecurity,
          case when c.relkind in ('v', 'm') then pg_get_viewdef(c.oid) end,
          pg_temp.grants(coalesce(c.relacl, acldefault(
            case when c.relkind = 'S' then 's' else 'r' end::"char", c.relowner)))
        from pg_class c
        where c.relnamespace = any(%(ns)s::oid[]) and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
        """,
        {"ns": ns},
    ).fetchall()
    entries = []
    for name, relkind, rls, force, view, acl in rows:
        kind = "sequence" if relkind == "S" else _RELKINDS[relkind]
        if kind == "table":
            kinds = {"p": "partitioned table", "f": "foreign table"}
            entries.append(Entry("table", name, name, kinds.get(relkind, "table")))
            text = f"row level security {'enabled' if rls else 'disabled'}"
            text += ", forced" if force else ""
            statement = f"alter table {name} {'enable' if rls else 'disable'} row level security;"
            entries.append(Entry("row level security of", name, name, text, statement))
        elif view is not None:
            entries.append(
                Entry(kind, name, name, view.strip(), f"create or replace {kind} {name} as\n{view}")
            )
        else:
            entries.append(Entry(kind, name, _sequence_owner(conn, name), "exists"))
        grants = _grants(acl)
        on = "sequence" if kind == "sequence" else "table"
        entries.append(Entry(f"grants on {on}", name, name, grants))
    return entries


def _sequence_owner(conn: Conn, sequence: str) -> str:
    """The table a sequence belongs to (an identity or serial column's), else itself."""
    row = conn.execute(
        "select d.refobjid::regclass::text from pg_depend d"
        " where d.classid = 'pg_class'::regclass and d.objid = %s::regclass"
        " and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')",
        (sequence,),
    ).fetchone()
    return str(row[0]) if row else sequence


def _columns(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select c.oid::regclass::text, a.attname,
          row_number() over (partition by c.oid order by a.attnum),
          format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid),
          a.attidentity, a.attgenerated,
          case when a.attcollation <> t.typcollation then co.collname end,
          pg_temp.grants(a.attacl)
        from pg_attribute a
        join pg_class c on c.oid = a.attrelid
        join pg_type t on t.oid = a.atttypid
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        left join pg_collation co on co.oid = a.attcollation
        where c.relnamespace = any(%(ns)s::oid[]) and c.relkind in ('r', 'p', 'f')
          and a.attnum > 0 and not a.attisdropped
        """,
        {"ns": ns},
    ).fetchall()
    entries = []
    for (
        table,
        column,
        position,
        type_,
        notnull,
        default,
        identity,
        generated,
        collation,
        acl,
    ) in rows:
        definition = type_
        definition += f" collate {collation}" if collation else ""
        if generated == "s":
            definition += f" generated always as ({default}) stored"
        elif default is not None:
            definition += f" default {default}"
        if identity:
            definition += f" generated {'always' if identity == 'a' else 'by default'} as identity"
        definition += " not null" if notnull else ""
        name = f"{table}.{column}"
        entries.append(
            Entry(
                "column",
                name,
                table,
                f"#{position}: {definition}",
                f"alter table {table} add column {column} {definition};",
            )
        )
        if acl:
            grants = _grants(acl)
            entries.append(Entry("grants on column", name, table, grants))
    return entries


def _constraints(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select con.conrelid::regclass::text, con.conname, pg_get_constraintdef(con.oid)
        from pg_constraint con
        where con.connamespace = any(%(ns)s::oid[]) and con.conrelid <> 0
          and con.contype <> 'n'  -- a column's not null, compared with the column
        """,
        {"ns": ns},
    ).fetchall()
    return [
        Entry(
            "constraint",
            f"{table}.{name}",
            table,
            definition,
            f"alter table {table} add constraint {name} {definition};",
        )
        for table, name, definition in rows
    ]


def _indexes(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select i.indexrelid::regclass::text, i.indrelid::regclass::text,
          pg_get_indexdef(i.indexrelid)
        from pg_index i join pg_class c on c.oid = i.indexrelid
        where c.relnamespace = any(%(ns)s::oid[])
        """,
        {"ns": ns},
    ).fetchall()
    return [Entry("index", name, table, d, f"{d};") for name, table, d in rows]


def _functions(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select p.oid::regprocedure::text, p.oid::regproc::text, pg_get_functiondef(p.oid),
          pg_temp.grants(coalesce(p.proacl, acldefault('f', p.proowner)))
        from pg_proc p
        where p.pronamespace = any(%(ns)s::oid[]) and p.prokind in ('f', 'p')
        """,
        {"ns": ns},
    ).fetchall()
    entries = []
    for signature, name, definition, acl in rows:
        text = definition.strip()
        entries.append(Entry("function", signature, name, text, f"{text};"))
        grants = _grants(acl)
        entries.append(Entry("grants on function", signature, name, grants))
    return entries


def _triggers(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid),
          t.tgfoid::regproc::text
        from pg_trigger t join pg_class c on c.oid = t.tgrelid
        where not t.tgisinternal and c.relnamespace = any(%(ns)s::oid[])
        """,
        {"ns": ns},
    ).fetchall()
    # A trigger on a table of another schema (auth.users) is declared with its function.
    return [
        Entry(
            "trigger",
            f"{table}.{name}",
            table if table.startswith("public.") else function,
            definition,
            f"{definition};",
        )
        for table, name, definition, function in rows
    ]


def _policies(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select quote_ident(p.schemaname) || '.' || quote_ident(p.tablename), p.policyname,
          p.permissive, p.roles::text[], p.cmd, p.qual, p.with_check
        from pg_policies p
        where p.schemaname in (select nspname from pg_namespace where oid = any(%(ns)s::oid[]))
        """,
        {"ns": ns},
    ).fetchall()
    entries = []
    for table, name, permissive, roles, cmd, qual, check in rows:
        text = f"as {permissive.lower()} for {cmd.lower()} to {', '.join(sorted(roles))}"
        text += f"\nusing ({qual})" if qual is not None else ""
        text += f"\nwith check ({check})" if check is not None else ""
        quoted = '"' + name.replace('"', '""') + '"'
        statement = f"create policy {quoted} on {table}\n  " + text.replace("\n", "\n  ") + ";"
        entries.append(Entry("policy", f"{quoted} on {table}", table, text, statement))
    return entries


def _default_privileges(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select d.defaclrole::regrole::text, case when d.defaclnamespace = 0 then ''
          else d.defaclnamespace::regnamespace::text end,
          d.defaclobjtype, pg_temp.grants(d.defaclacl)
        from pg_default_acl d
        """,
        {"ns": ns},
    ).fetchall()
    objects = {"r": "tables", "S": "sequences", "f": "functions", "T": "types", "n": "schemas"}
    return [
        Entry(
            "default privileges",
            f"of {role} on {objects.get(kind, kind)}" + (f" in schema {schema}" if schema else ""),
            # Declared by an `alter default privileges` statement, in no one table's file.
            "alter default privileges",
            _grants(acl),
        )
        for role, schema, kind, acl in rows
    ]


def _types(conn: Conn, ns: list[int]) -> list[Entry]:
    rows = conn.execute(
        """
        select t.oid::regtype::text, t.typtype,
          case t.typtype
            when 'e' then (select string_agg(quote_literal(e.enumlabel), ', '
              order by e.enumsortorder) from pg_enum e where e.enumtypid = t.oid)
            when 'd' then format_type(t.typbasetype, t.typtypmod)
              || coalesce(' ' || (select string_agg(pg_get_constraintdef(c.oid), ' '
                order by c.conname) from pg_constraint c where c.contypid = t.oid), '')
          end
        from pg_type t
        where t.typnamespace = any(%(ns)s::oid[]) and t.typtype in ('e', 'd')
        """,
        {"ns": ns},
    ).fetchall()
    return [
        Entry("enum" if kind == "e" else "domain", name, name, text or "")
        for name, kind, text in rows
    ]


_READERS: list[Callable[[Conn, list[int]], list[Entry]]] = [
    _schemas,
    _extensions,
    _relations,
    _columns,
    _constraints,
    _indexes,
    _functions,
    _triggers,
    _policies,
    _default_privileges,
    _types,
]


# --- Where a definition lives ---------------------------------------------------------------


def _defines(anchor: str) -> re.Pattern[str]:
    """A statement that defines `anchor` (a table, view, function, type or sequence)."""
    name = re.escape(anchor).replace(r"\.", r"\s*\.\s*")
    return re.compile(
        r"\bcreate\s+(?:or\s+replace\s+)?(?:unlogged\s+)?"
        r"(?:table|view|materialized\s+view|function|procedure|type|domain|sequence)"
        rf"\s+(?:if\s+not\s+exists\s+)?{name}\s*[(\s]",
        re.IGNORECASE,
    )


def _mentions(anchor: str) -> re.Pattern[str]:
    name = re.escape(anchor).replace(r"\.", r"\s*\.\s*")
    return re.compile(rf"(?<![\w.]){name}(?![\w])", re.IGNORECASE)


def home(anchor: str, files: Sequence[Path], *, grants: bool = False) -> list[Path]:
    """The schema files where `anchor` is defined (with those that grant or revoke on it, for
    `grants`), else those that name it."""
    texts = {path: strip_comments(path.read_text()) for path in files}
    found = [p for p, t in texts.items() if _defines(anchor).search(t)]
    if grants:
        granting = re.compile(rf"\b(?:grant|revoke)\b[^;]*{_mentions(anchor).pattern}", re.I)
        found += [p for p, t in texts.items() if p not in found and granting.search(t)]
    return found or [p for p, t in texts.items() if _mentions(anchor).search(t)]


def strip_comments(sql: str) -> str:
    """`sql` without its `--` comments (a function's name in a comment defines nothing)."""
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


# --- The drift, told --------------------------------------------------------------------------


def drift(migrated: Catalog, declared: Catalog, files: Sequence[Path], root: Path) -> list[str]:
    """What differs between the migrated database and the declared one, one paragraph each,
    each naming the object and the schema file where its definition belongs."""

    def where(entry: Entry) -> str:
        found = home(entry.anchor, files, grants=entry.kind.startswith("grants"))
        if found:
            return ", ".join(str(p.relative_to(root)) for p in found)
        return (
            f"the file of its concern in supabase/schemas/ (none names {entry.anchor} yet;"
            " a new file is listed in supabase/config.toml)"
        )

    told: list[tuple[str, str]] = []
    keys = migrated.keys() | declared.keys()
    # A table on one side only is told once, with what belongs to it (its columns,
    # constraints, indexes, policies, triggers, grants) and is on that side only too.
    missing = {
        key: (
            side,
            [
                other
                for other in keys - other_side.keys()
                if other != key and side[other].anchor == side[key].name
            ],
        )
        for side, other_side in ((migrated, declared), (declared, migrated))
        for key in side.keys() - other_side.keys()
        if side[key].kind == "table"
    }
    folded = {other for _, belonging in missing.values() for other in belonging}
    for key in sorted(keys - folded):
        old, new = migrated.get(key), declared.get(key)
        if key.startswith("grants on column ") and (old is None) != (new is None):
            # No grants on the column at all on one side: a difference like any other.
            given = old or new
            assert given is not None
            old, new = (old or replace(given, text="")), (new or replace(given, text=""))
        if key in missing:
            side, belonging = missing[key]
            entry = side[key]
            body = "\n".join(
                [entry.statement or entry.text]
                + [
                    _as_statement(b, side[b])
                    for b in sorted(belonging, key=_creation_order)
                    if not _in_create_table(side[b], side)
                ]
            )
            told.append(_one_side(key, where(entry), body, migrated=side is migrated))
        elif old is not None and new is None:
            told.append(_one_side(key, where(old), old.statement or old.text, migrated=True))
        elif old is None and new is not None:
            home_ = where(new)
            body = new.statement or f"(the statement of {home_} that makes it)"
            told.append(_one_side(key, home_, body, migrated=False))
        elif old is not None and new is not None and old.text != new.text:
            lines = difflib.unified_diff(
                old.text.splitlines(),
                new.text.splitlines(),
                "the migrations build",
                "supabase/schemas/ declares",
                lineterm="",
            )
            change = _change(old, new)
            home_ = where(new)
            told.append(
                (
                    home_,
                    f"{key}: differs; declared in {home_}.\n"
                    + _indent("\n".join(lines))
                    + "\n  If a migration is right, change the schema file to match."
                    + ("\n" + _needs(change) if change else ""),
                )
            )
    # Grouped by the file to change.
    return [paragraph for _, paragraph in sorted(told)]


def _one_side(key: str, home_: str, body: str, *, migrated: bool) -> tuple[str, str]:
    """An object only the migrations make, or only the schema files declare."""
    if migrated:
        told = (
            f"{key}: the migrations make it, supabase/schemas/ does not declare it.\n"
            f"  Declare it in {home_}:\n" + _indent(body)
        )
    else:
        told = f"{key}: declared in {home_}, but no migration makes it.\n" + _needs(body)
    return home_, told


def _as_statement(key: str, entry: Entry) -> str:
    if entry.statement:
        return entry.statement
    return "\n".join(f"-- {key}: {line}" for line in entry.text.splitlines())


def _in_create_table(entry: Entry, side: Catalog) -> bool:
    """Told by its table's `create table`: a column, a constraint, a constraint's index."""
    if entry.kind in ("column", "constraint"):
        return True
    constraint = f"constraint {entry.anchor}.{entry.name.rpartition('.')[2]}"
    return entry.kind == "index" and constraint in side


def _creation_order(key: str) -> tuple[int, str]:
    order = ("index", "row level security of", "policy", "trigger", "grants on")
    return next((i for i, kind in enumerate(order) if key.startswith(kind)), len(order)), key


def _needs(statement: str) -> str:
    return "  If the schema file is right, a new migration needs:\n" + _indent(statement)


def _change(old: Entry, new: Entry) -> str | None:
    """The statement that turns `old` into `new`, where it is mechanical."""
    if new.kind in ("function", "view", "materialized view", "row level security of"):
        return new.statement
    if new.kind == "policy":
        return f"drop policy if exists {new.name};\n{new.statement}"
    if new.kind == "index":
        contract = "-- contract: <why nothing needs the old index>"
        return f"{contract}\ndrop index {new.name};\n{new.statement}"
    if new.kind == "constraint":
        table, _, name = new.name.rpartition(".")
        return f"alter table {table} drop constraint {name};\n{new.statement}"
    if new.kind == "trigger" and new.statement:
        return new.statement.replace("CREATE TRIGGER", "CREATE OR REPLACE TRIGGER", 1)
    if new.kind.startswith("grants on"):
        return _regrant(old, new)
    if new.kind == "column":
        if old.text.partition(": ")[2] == new.text.partition(": ")[2]:
            return (
                "(none: only the position differs; a migration adds a column last, so the"
                " schema file declares it last too, in the order the migrations added them)"
            )
        return "(an `alter table ... alter column` for what differs above)"
    return None


def _privileges(text: str) -> dict[str, set[str]]:
    return {
        grantee: {p.removesuffix(" (grantable)") for p in privileges.split(", ")}
        for grantee, _, privileges in (line.partition(": ") for line in text.splitlines())
        if privileges
    }


def _regrant(old: Entry, new: Entry) -> str:
    """`grant` and `revoke` statements from the grants `old` to those of `new`."""
    if new.kind == "grants on column":
        table, _, column = new.name.rpartition(".")
        on, columns = f"table {table}", f" ({column})"
    elif new.kind == "grants on function":
        on, columns = f"function {new.name}", ""
    else:
        on, columns = f"{new.kind.removeprefix('grants on ')} {new.name}", ""
    before, after = _privileges(old.text), _privileges(new.text)
    statements = []
    for grantee in sorted(before.keys() | after.keys()):
        taken = sorted(before.get(grantee, set()) - after.get(grantee, set()))
        given = sorted(after.get(grantee, set()) - before.get(grantee, set()))
        if taken:
            statements.append(f"revoke {', '.join(taken).lower()}{columns} on {on} from {grantee};")
        if given:
            statements.append(f"grant {', '.join(given).lower()}{columns} on {on} to {grantee};")
    return "\n".join(statements)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
