// SPDX-License-Identifier: GPL-2.0
/* Lab stand-in for nvidia-uvm: no GPU code, only the interface the sparkfleet roles inspect. */
#include <linux/init.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "standin-version.h"

static bool uvm_pack_sysmem_leaf_tables = UVM_STANDIN_PACK_DEFAULT;
module_param(uvm_pack_sysmem_leaf_tables, bool, 0444);
MODULE_PARM_DESC(uvm_pack_sysmem_leaf_tables, "Pack 256-byte sysmem leaf page tables into shared pages (stand-in)");

static int __init uvm_standin_init(void)
{
	pr_info("nvidia-uvm stand-in loaded (packing=%d)\n", uvm_pack_sysmem_leaf_tables);
	return 0;
}

static void __exit uvm_standin_exit(void)
{
}

module_init(uvm_standin_init);
module_exit(uvm_standin_exit);
MODULE_LICENSE("GPL");
MODULE_VERSION(UVM_STANDIN_DRIVER_VERSION);
MODULE_DESCRIPTION("sparkfleet lab stand-in for nvidia-uvm");
