#!/usr/bin/env node
// The official LanceDB implementation as an oracle for walctl's pure-Go Lance
// code. Every command prints one JSON document on stdout; errors go to stderr
// with a non-zero exit status.
//
//   node oracle.js dump     <dir> <table> [--version N] [--filter SQL] [--columns a,b]
//   node oracle.js count    <dir> <table> [--version N] [--filter SQL]
//   node oracle.js append   <dir> <table> <rows.json | batches.arrow>
//   node oracle.js create   <dir> <table> <rows.json | batches.arrow> [--storage-version 2.0|2.1]
//   node oracle.js optimize <dir> <table>
//   node oracle.js versions <dir> <table>
//   node oracle.js bench    <dir> <table> <adds> <batches-per-add> <rows-per-batch>
//
// <dir> is the directory holding <table>.lance: an absolute path (a relative
// one is taken as LanceDB Cloud) or an object-store URI (s3://bucket/prefix).
// Storage options (aws_endpoint, aws_access_key_id, aws_secret_access_key,
// aws_region, allow_http …) come as a JSON object in the environment variable
// LANCE_ORACLE_STORAGE_OPTIONS, never on the command line, so that no secret
// shows in a process listing. rows.json is an array of plain row
// objects; int64 values may be given as numbers. A file ending in .arrow is
// an Arrow IPC stream instead, taken with its exact schema (every type walctl
// supports). This file is CommonJS so that
// lancedb and this script share one copy of apache-arrow (an ES-module import
// would load a second copy and break LanceDB's instanceof checks).
"use strict";

const path = require("path");
const fs = require("fs");
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

function parseArgs(argv) {
  const pos = [];
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith("--")) {
      opts[argv[i].slice(2)] = argv[i + 1];
      i++;
    } else {
      pos.push(argv[i]);
    }
  }
  return { pos, opts };
}

function storageOptions() {
  const raw = process.env.LANCE_ORACLE_STORAGE_OPTIONS;
  return raw ? JSON.parse(raw) : undefined;
}

async function connect(dir) {
  const uri = /^[a-z][a-z0-9+.-]*:\/\//i.test(dir);
  if (!uri && !path.isAbsolute(dir)) {
    throw new Error(`directory must be absolute or a URI: ${dir}`);
  }
  const storage = storageOptions();
  return storage ? lancedb.connect(dir, { storageOptions: storage }) : lancedb.connect(dir);
}

async function open(dir, name, opts) {
  const db = await connect(dir);
  const tableOpts = {};
  if (opts && opts.version !== undefined) {
    tableOpts.version = Number(opts.version);
  }
  return { db, tbl: await db.openTable(name, [], tableOpts) };
}

function isValid(data, i) {
  if (!data.nullBitmap || data.nullBitmap.length === 0 || data.nullCount === 0) {
    return true;
  }
  const j = data.offset + i;
  return (data.nullBitmap[j >> 3] & (1 << (j & 7))) !== 0;
}

function b64(u8) {
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString("base64");
}

// cell renders one value canonically: integers of 64 bits as decimal strings,
// float16 as its raw bits, timestamps and dates as their stored integers,
// binary as base64, fixed-size lists as arrays.
function cell(data, i) {
  if (!isValid(data, i)) {
    return null;
  }
  const t = data.type;
  const j = data.offset + i;
  switch (t.typeId) {
    case arrow.Type.Bool:
      return (data.values[j >> 3] & (1 << (j & 7))) !== 0;
    case arrow.Type.Int: {
      const v = data.values[j];
      return t.bitWidth === 64 ? v.toString() : v;
    }
    case arrow.Type.Float:
      return data.values[j]; // Uint16Array (raw bits) for float16
    case arrow.Type.Date:
    case arrow.Type.Timestamp: {
      const v = data.values;
      if (v instanceof Int32Array && t.typeId === arrow.Type.Timestamp) {
        return (BigInt(v[2 * j + 1]) * 4294967296n + BigInt(v[2 * j] >>> 0)).toString();
      }
      return typeof v[j] === "bigint" ? v[j].toString() : String(v[j]);
    }
    case arrow.Type.Utf8:
    case arrow.Type.LargeUtf8:
    case arrow.Type.Binary:
    case arrow.Type.LargeBinary: {
      const start = Number(data.valueOffsets[j]);
      const end = Number(data.valueOffsets[j + 1]);
      const bytes = data.values.subarray(start, end);
      if (t.typeId === arrow.Type.Utf8 || t.typeId === arrow.Type.LargeUtf8) {
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
      }
      return b64(bytes);
    }
    case arrow.Type.FixedSizeBinary:
      return b64(data.values.subarray(j * t.byteWidth, (j + 1) * t.byteWidth));
    case arrow.Type.FixedSizeList: {
      const child = data.children[0];
      const out = [];
      for (let k = 0; k < t.listSize; k++) {
        out.push(cell(child, j * t.listSize + k - child.offset));
      }
      return out;
    }
    default:
      throw new Error(`oracle cannot render type ${t}`);
  }
}

function renderTable(table) {
  const columns = {};
  for (const field of table.schema.fields) {
    columns[field.name] = [];
  }
  for (const batch of table.batches) {
    for (const field of table.schema.fields) {
      const data = batch.getChild(field.name).data[0];
      for (let i = 0; i < batch.numRows; i++) {
        columns[field.name].push(cell(data, i));
      }
    }
  }
  const schema = table.schema.fields.map((f) => ({
    name: f.name,
    type: String(f.type),
    nullable: f.nullable,
  }));
  return { num_rows: table.numRows, schema, columns };
}

async function dump(dir, name, opts) {
  const { tbl } = await open(dir, name, opts);
  let q = tbl.query();
  if (opts.filter) {
    q = q.where(opts.filter);
  }
  if (opts.columns) {
    q = q.select(opts.columns.split(","));
  }
  const table = await q.toArrow();
  const out = renderTable(table);
  out.version = await tbl.version();
  out.count_rows = await tbl.countRows(opts.filter);
  return out;
}

function readRows(file) {
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

// readIPC reads an Arrow IPC stream (or file) into a table.
function readIPC(file) {
  return arrow.tableFromIPC(fs.readFileSync(file));
}

async function append(dir, name, file) {
  const { tbl } = await open(dir, name);
  await tbl.add(file.endsWith(".arrow") ? readIPC(file) : readRows(file));
  return { version: await tbl.version(), count_rows: await tbl.countRows() };
}

function specType(t) {
  if (t.startsWith("fsl_f32:")) {
    const dim = Number(t.slice("fsl_f32:".length));
    return new arrow.FixedSizeList(dim, new arrow.Field("item", new arrow.Float32(), true));
  }
  switch (t) {
    case "int64":
      return new arrow.Int64();
    case "utf8":
      return new arrow.Utf8();
    case "float64":
      return new arrow.Float64();
    case "float32":
      return new arrow.Float32();
  }
  throw new Error(`spec type ${t}`);
}

// fslData builds a fixed-size list of float32 whose null rows still occupy
// their items, as the Arrow format requires (vectorFromArray does not).
function fslData(type, values) {
  const dim = type.listSize;
  const items = new Float32Array(values.length * dim);
  const bitmap = new Uint8Array((values.length + 7) >> 3);
  let nulls = 0;
  values.forEach((v, i) => {
    if (v === null) {
      nulls++;
      return;
    }
    bitmap[i >> 3] |= 1 << (i & 7);
    items.set(v, i * dim);
  });
  const child = arrow.makeData({ type: type.children[0].type, length: items.length, data: items });
  return arrow.makeData({ type, length: values.length, nullCount: nulls, nullBitmap: bitmap, child });
}

// specTable builds an Arrow table with an exact schema from
// {schema: [{name, type, nullable}], rows: [...]}.
function specTable(spec) {
  const fields = spec.schema.map((f) => new arrow.Field(f.name, specType(f.type), f.nullable));
  const schema = new arrow.Schema(fields);
  const children = fields.map((f, i) => {
    let values = spec.rows.map((r) => (r[f.name] === undefined ? null : r[f.name]));
    if (f.type.typeId === arrow.Type.FixedSizeList) {
      return fslData(f.type, values);
    }
    if (spec.schema[i].type === "int64") {
      values = values.map((v) => (v === null ? null : BigInt(v)));
    }
    return arrow.vectorFromArray(values, f.type).data[0];
  });
  const data = arrow.makeData({
    type: new arrow.Struct(fields),
    length: spec.rows.length,
    nullCount: 0,
    children,
  });
  return new arrow.Table([new arrow.RecordBatch(schema, data)]);
}

async function create(dir, name, file, opts) {
  const db = await connect(dir);
  const createOpts = { mode: "create" };
  if (opts["storage-version"]) {
    createOpts.storageOptions = { ...storageOptions(), new_table_data_storage_version: opts["storage-version"] };
  }
  const data = file.endsWith(".arrow") ? readIPC(file) : specTable(readRows(file));
  const tbl = await db.createTable(name, data, createOpts);
  return { version: await tbl.version(), count_rows: await tbl.countRows() };
}

async function optimize(dir, name) {
  const { tbl } = await open(dir, name);
  const stats = await tbl.optimize();
  return {
    version: await tbl.version(),
    count_rows: await tbl.countRows(),
    fragments_removed: stats.compaction.fragmentsRemoved,
    fragments_added: stats.compaction.fragmentsAdded,
  };
}

async function versions(dir, name) {
  const { tbl } = await open(dir, name);
  const vs = await tbl.listVersions();
  return { versions: vs.map((v) => ({ version: v.version, timestamp: v.timestamp })) };
}

module.exports = { cell, renderTable, open, parseArgs, specTable };

async function main() {
  const { pos, opts } = parseArgs(process.argv.slice(2));
  const [cmd, dir, name, arg] = pos;
  let out;
  switch (cmd) {
    case "dump":
      out = await dump(dir, name, opts);
      break;
    case "count": {
      const { tbl } = await open(dir, name, opts);
      out = { count_rows: await tbl.countRows(opts.filter) };
      break;
    }
    case "append":
      out = await append(dir, name, arg);
      break;
    case "create":
      out = await create(dir, name, arg, opts);
      break;
    case "optimize":
      out = await optimize(dir, name);
      break;
    case "versions":
      out = await versions(dir, name);
      break;
    case "bench":
      out = await require("./bench.js").run(dir, name, pos.slice(3).map(Number));
      break;
    default:
      throw new Error(`unknown command ${cmd}`);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`oracle: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  });
}
