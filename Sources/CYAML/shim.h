#ifndef HAMMOCK_CYAML_SHIM_H
#define HAMMOCK_CYAML_SHIM_H

#include <yaml.h>

#endif
