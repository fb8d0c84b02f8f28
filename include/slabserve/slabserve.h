#pragma once
// slabserve's public engine API, the one header an embedding program includes: load a model
// (LoadOptions -> LoadedModel), tokenize and render chats with it, and generate through its
// Engine. See include/slabserve/README.md for a whole program.
#include "slabserve/engine.h"
#include "slabserve/model.h"
#include "slabserve/options.h"
#include "slabserve/output_constraints.h"
#include "slabserve/tokenizer.h"
#include "slabserve/tool_calls.h"
#include "slabserve/topology.h"
