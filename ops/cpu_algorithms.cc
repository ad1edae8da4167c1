#include "ops/cpu_algorithms.h"

#include "ops/chain_broadcast.h"
#include "ops/data_plane_allreduce.h"
#include "ops/hierarchical_reducescatter.h"
#include "ops/ring_allgather.h"
#include "ops/ring_reducescatter.h"
#include "ops/shm_allgather.h"
#include "ops/shm_alltoall.h"
#include "ops/shm_broadcast.h"
#include "ops/shm_reducescatter.h"

namespace kolo::ops {

// An allreduce over shared memory is not in this list: ShmAllreduce goes from the inputs to the
// outputs in one step, the copies and the scaling folded in (CpuExecutor::AllreduceShm), so
// there is no in-place reduction between copies to choose.
const Algorithm<AllreduceArgs> kAllreduceAlgorithms[2] = {
    {"HIERARCHICAL_ALLREDUCE", Hierarchically,
     [](const CpuPlanes& p, const AllreduceArgs& a) {
       return p.hierarchical->Run(a.data, a.count, a.dtype, a.op, *p.scratch, a.what);
     }},
    {"RING_ALLREDUCE", Always,
     [](const CpuPlanes& p, const AllreduceArgs& a) {
       return DataPlaneAllreduce(*p.plane, a.data, a.count, a.dtype, a.op, *p.scratch, a.what);
     }},
};

const Algorithm<BroadcastArgs> kBroadcastAlgorithms[3] = {
    {"SHM_BROADCAST", OnSharedMemory,
     [](const CpuPlanes& p, const BroadcastArgs& a) {
       return ShmBroadcast(*p.shm, a.data, a.bytes, a.root, a.what);
     }},
    {"HIERARCHICAL_BROADCAST", Hierarchically,
     [](const CpuPlanes& p, const BroadcastArgs& a) {
       return HierarchicalBroadcast(*p.host, a.data, a.bytes, a.root, a.what);
     }},
    {"CHAIN_BROADCAST", Always,
     [](const CpuPlanes& p, const BroadcastArgs& a) {
       return ChainBroadcast(*p.plane, a.data, a.bytes, a.root, a.what);
     }},
};

const Algorithm<AllgatherArgs> kAllgatherAlgorithms[3] = {
    {"SHM_ALLGATHER", OnSharedMemory,
     [](const CpuPlanes& p, const AllgatherArgs& a) {
       return ShmAllgatherBlocks(*p.shm, a.data, a.block_bytes, a.what);
     }},
    {"HIERARCHICAL_ALLGATHER", Hierarchically,
     [](const CpuPlanes& p, const AllgatherArgs& a) {
       return HierarchicalAllgather(*p.host, a.data, a.block_bytes, a.what);
     }},
    {"RING_ALLGATHER", Always,
     [](const CpuPlanes& p, const AllgatherArgs& a) {
       return RingAllgather(*p.plane, a.data, a.block_bytes, a.what);
     }},
};

const Algorithm<ReducescatterArgs> kReducescatterAlgorithms[3] = {
    {"HIERARCHICAL_REDUCESCATTER", Hierarchically,
     [](const CpuPlanes& p, const ReducescatterArgs& a) {
       return HierarchicalReducescatter(*p.host, a.buffer, a.block_elements, a.dtype, a.op,
                                        *p.scratch, a.what);
     }},
    {"SHM_REDUCESCATTER", OnSharedMemory,
     [](const CpuPlanes& p, const ReducescatterArgs& a) {
       return ShmReducescatter(*p.shm, a.buffer, a.own, a.block_elements, a.dtype, a.op, a.what);
     }},
    {"RING_REDUCESCATTER", Always,
     [](const CpuPlanes& p, const ReducescatterArgs& a) {
       return RingReducescatterBlocks(*p.plane, a.buffer, a.block_elements, a.dtype, a.ring_op,
                                      *p.scratch, a.what);
     }},
};

const Algorithm<AlltoallArgs> kAlltoallAlgorithms[2] = {
    {"SHM_ALLTOALL", OnSharedMemory,
     [](const CpuPlanes& p, const AlltoallArgs& a) {
       // The whole matrix in bytes: every rank's slots are sized by what it sends to each.
       std::vector<size_t> matrix_bytes(a.splits.size());
       for (size_t i = 0; i < matrix_bytes.size(); ++i) {
         matrix_bytes[i] = static_cast<size_t>(a.splits[i]) * a.row_bytes;
       }
       return ShmAlltoall(*p.shm, a.input, a.send, a.output, a.recv, matrix_bytes, a.what);
     }},
    {"PAIRWISE_ALLTOALL", Always,
     [](const CpuPlanes& p, const AlltoallArgs& a) {
       return PairwiseAlltoall(*p.plane, a.input, a.send, a.output, a.recv, a.what);
     }},
};

}  // namespace kolo::ops
