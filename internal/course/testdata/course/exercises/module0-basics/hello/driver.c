#include "common.h"
int main(void){return 0;}
