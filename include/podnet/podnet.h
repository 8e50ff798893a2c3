// The one header a podnet user includes.
#pragma once

#include <podnet/status.h>
#include <podnet/xfer.h>
