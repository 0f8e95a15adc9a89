// Parse and validate an AsyncAPI document with the official parser and its Avro schema
// parser, as AsyncAPI's own tools do. Prints one JSON line: {"valid", "errors",
// "warnings", "channels", "operations", "messages"}; exits 1 when invalid.
//   node validate.mjs asyncapi.yaml
import { readFileSync } from 'node:fs';
import { Parser } from '@asyncapi/parser';
import { AvroSchemaParser } from '@asyncapi/avro-schema-parser';

const parser = new Parser();
parser.registerSchemaParser(AvroSchemaParser());
const source = readFileSync(process.argv[2], 'utf8');
const { document, diagnostics } = await parser.parse(source);
const errors = diagnostics.filter((d) => d.severity === 0);
const warnings = diagnostics.filter((d) => d.severity === 1);
const describe = (d) => `${d.code}: ${d.message} at ${JSON.stringify(d.path)}`;
console.log(JSON.stringify({
  valid: document !== undefined && errors.length === 0,
  errors: errors.map(describe),
  warnings: warnings.map(describe),
  channels: document ? document.channels().length : 0,
  operations: document ? document.operations().length : 0,
  messages: document ? document.components().messages().length : 0,
}));
process.exit(document !== undefined && errors.length === 0 ? 0 : 1);
