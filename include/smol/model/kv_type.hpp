// KvType: the element type a KV cache stores keys and values in.
//
// Its own header so that what only names the type (the session file format, which
// the fuzz build compiles without the kernels) need not include the cache itself.
#pragma once

namespace smol {

enum class KvType { f16, f32 };

}  // namespace smol
