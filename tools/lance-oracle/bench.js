"use strict";
// Write throughput of the official LanceDB table.add on the batches that
// walctl's benchmark (internal/core/lance/lancebench) generates: the same
// deterministic values, schema and batch sizes. Only add() is timed.

const fs = require("fs");
const path = require("path");
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const DIM = 768;
const PAYLOAD = 256;

function schema() {
  return new arrow.Schema([
    new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("ts", new arrow.TimestampMicrosecond(), false),
    new arrow.Field("name", new arrow.Utf8(), false),
    new arrow.Field("vec", new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true)), false),
    new arrow.Field("payload", new arrow.Binary(), false),
  ]);
}

function makeBatch(sch, first, n) {
  const ids = new BigInt64Array(n);
  const ts = new BigInt64Array(n);
  const nameOffsets = new Int32Array(n + 1);
  const names = [];
  const vec = new Float32Array(n * DIM);
  const payOffsets = new Int32Array(n + 1);
  const pay = new Uint8Array(n * PAYLOAD);
  let nameLen = 0;
  for (let i = 0; i < n; i++) {
    const g = first + i;
    ids[i] = BigInt(g);
    ts[i] = 1700000000000000n + BigInt(g);
    const s = Buffer.from(`row-${g}`);
    names.push(s);
    nameLen += s.length;
    nameOffsets[i + 1] = nameLen;
    for (let j = 0; j < DIM; j++) {
      vec[i * DIM + j] = ((g * DIM + j) % 1000) / 1000;
    }
    for (let j = 0; j < PAYLOAD; j++) {
      pay[i * PAYLOAD + j] = (g * 31 + j * 7) & 255;
    }
    payOffsets[i + 1] = (i + 1) * PAYLOAD;
  }
  const f = sch.fields;
  const children = [
    arrow.makeData({ type: f[0].type, length: n, data: ids }),
    arrow.makeData({ type: f[1].type, length: n, data: ts }),
    arrow.makeData({ type: f[2].type, length: n, valueOffsets: nameOffsets, data: Buffer.concat(names) }),
    arrow.makeData({
      type: f[3].type,
      length: n,
      child: arrow.makeData({ type: f[3].type.children[0].type, length: n * DIM, data: vec }),
    }),
    arrow.makeData({ type: f[4].type, length: n, valueOffsets: payOffsets, data: pay }),
  ];
  const data = arrow.makeData({ type: new arrow.Struct(sch.fields), length: n, nullCount: 0, children });
  return new arrow.RecordBatch(sch, data);
}

function dirBytes(dir) {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    total += e.isDirectory() ? dirBytes(p) : fs.statSync(p).size;
  }
  return total;
}

async function run(dir, name, [adds, batches, rows]) {
  const db = await lancedb.connect(dir);
  const sch = schema();
  const tbl = await db.createEmptyTable(name, sch, { mode: "create" });
  let ns = 0n;
  for (let a = 0; a < adds; a++) {
    const bs = [];
    for (let b = 0; b < batches; b++) {
      bs.push(makeBatch(sch, (a * batches + b) * rows, rows));
    }
    const t = new arrow.Table(bs);
    const t0 = process.hrtime.bigint();
    await tbl.add(t);
    ns += process.hrtime.bigint() - t0;
  }
  return {
    seconds: Number(ns) / 1e9,
    rows: await tbl.countRows(),
    data_bytes: dirBytes(path.join(dir, `${name}.lance`, "data")),
    version: await tbl.version(),
  };
}

module.exports = { run };
