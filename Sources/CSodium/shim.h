#ifndef NATTER_CSODIUM_SHIM_H
#define NATTER_CSODIUM_SHIM_H
#include <sodium.h>
#endif
