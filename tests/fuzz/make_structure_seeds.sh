#!/bin/sh
# Seeds for fuzz_grammar_structure: recipes a few bytes long (the first byte picks a deep
# request body, a schema or GBNF; the rest pick counts and shapes, fuzz_grammar_structure.cpp).
set -eu
mkdir -p "$1"
cd "$1"
printf '\000\377\377\001' > deep_body
printf '\001\003\002\377\060\001\001\003' > schema_properties
printf '\001\002\000\001\001\000\377\020\000\377\020\000\377\020' > schema_pattern
printf '\002\003\377\020\000\377\020\000\377\020\000' > gbnf_nested
printf '\001\004\004\004\004\004\002\005\006\007\003' > schema_allof
printf '\001\002\005\377\100\377\377\005\377\100\377\377\002\377\020\011\377\003' > schema_counted
