/* SPDX-License-Identifier: BSD-2-Clause */
/* Compiles the ABI header as C11, the language of the guest kernel module:
 * its static checks (sizes, offsets, the C-only SGE offsets) run here. */
#include "vhost-rdma/abi/virtio_rdma.h"

int vrdma_abi_layout_checked_in_c(void) { return VIRTIO_RDMA_ABI_VERSION; }
