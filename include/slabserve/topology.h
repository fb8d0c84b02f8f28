#pragma once
// The machine as hwloc sees it and how it splits into serving instances, for programs that place
// several engines (`slabserve topology`, scripts/launch-multi.sh): the runtime's own types,
// re-exported. PlacementOptions (options.h) takes the cpus and node an InstancePlan gives.
#include "runtime/partition.h"
#include "runtime/topology.h"

namespace slab::api {

using slab::CoreInfo;
using slab::InstancePlan;
using slab::partition;
using slab::PartitionOptions;
using slab::Topology;
using slab::TopologyInfo;

}  // namespace slab::api
