int hello(int n){return 0;}
